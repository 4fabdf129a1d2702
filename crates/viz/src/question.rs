//! The question panel: one question per step of the `question` timeline, with its text, images, the current
//! view's relocalised camera, the target and the predicted and true answers.
//!
//! Inputs are plain values (strings, images, optional poses and points) so that any caller can fill them —
//! the map answerer, a VLM run, a script replaying `predictions.jsonl` — without this crate knowing
//! answerers.

use gst_core::{PinholeCamera, Pose3, RgbImage};

use crate::convert::{finite3, pinhole, point3, rgb, transform};
use crate::images::{ColorPayload, color_payload};
use crate::{Recorder, VizError, paths};

/// Gap between question images laid side by side, pixels.
const IMAGE_GAP_PX: f32 = 16.0;
const TARGET_COLOR: [u8; 3] = [255, 40, 40];
const PREDICTED_COLOR: [u8; 3] = [255, 140, 0];
const TRUTH_COLOR: [u8; 3] = [40, 200, 80];
const POINT_RADIUS_M: f32 = 0.08;
const ARROW_RADIUS_M: f32 = 0.02;
const TOPDOWN_POINT_PX: f32 = 6.0;
const HEADING_ARROW_PX: f32 = 40.0;
/// Normalised top-down coordinates run over [0, 1000) (GST's `<point>x y</point>`, 0–999).
const NORMALIZED_RANGE: f64 = 1000.0;

/// An image of a question and what it is (`"current view"`, `"option A"`, …).
#[derive(Clone, Copy, Debug)]
pub struct NamedImage<'a> {
    pub name: &'a str,
    pub image: &'a RgbImage,
}

/// The current view placed in the estimate's world (relocalisation's result).
#[derive(Clone, Copy, Debug)]
pub struct CurrentView<'a> {
    pub slam_from_camera: Pose3,
    pub camera: PinholeCamera,
    /// The current-view image, drawn in the camera's frustum.
    pub image: Option<&'a RgbImage>,
}

/// The answer on a top-down image, in GST's normalised coordinates (x right, y down, [0, 999]); headings in
/// degrees, 0 = towards the top of the image, counter-clockwise positive (the Ori convention).
#[derive(Clone, Copy, Debug)]
pub struct TopdownAnswer<'a> {
    pub image: &'a RgbImage,
    pub predicted: Option<[f64; 2]>,
    pub truth: Option<[f64; 2]>,
    pub predicted_heading_deg: Option<f64>,
    pub truth_heading_deg: Option<f64>,
}

/// One question to show. 3D points are in the estimate's world ([`paths::SLAM`]): convert ground truth
/// with the inverse of the trajectory alignment and map-frame points with `map_from_world` inverted.
#[derive(Clone, Debug, Default)]
pub struct QuestionLog<'a> {
    pub uid: &'a str,
    /// The task id as in question files (`Object_Localization_Egocentric_Direction_visual`).
    pub task: &'a str,
    /// The question's texts, in order.
    pub texts: &'a [String],
    /// The answerer's raw output.
    pub prediction: &'a str,
    pub ground_truth: &'a str,
    pub images: Vec<NamedImage<'a>>,
    pub current_view: Option<CurrentView<'a>>,
    pub target: Option<[f64; 3]>,
    pub predicted: Option<[f64; 3]>,
    pub truth: Option<[f64; 3]>,
    pub topdown: Option<TopdownAnswer<'a>>,
}

/// Markdown of the question panel. Question texts may hold `<point>`-like tags that a markdown renderer
/// would swallow as HTML, so `<` is escaped; answers go in code blocks, verbatim.
fn question_markdown(question: &QuestionLog<'_>) -> String {
    let escape = |s: &str| s.replace('<', "\\<");
    let fence = |s: &str| format!("```text\n{}\n```", s.replace("```", "'''"));
    let mut text = format!("### {}\n\n`{}`\n\n", escape(question.task), question.uid.replace('`', "'"));
    for t in question.texts {
        text.push_str(&escape(t.trim()));
        text.push_str("\n\n");
    }
    if !question.images.is_empty() {
        let names: Vec<&str> = question.images.iter().map(|i| i.name).collect();
        text.push_str(&format!("Images: {}\n\n", escape(&names.join(", "))));
    }
    text.push_str(&format!(
        "**Prediction**\n\n{}\n\n**Ground truth**\n\n{}\n",
        fence(question.prediction),
        fence(question.ground_truth)
    ));
    text
}

/// Pixel of a normalised point on an image `width` x `height` (the centre of its normalised bin; Rerun's
/// pixel corners at integers).
fn pixel_from_normalized(p: [f64; 2], width: u32, height: u32) -> [f32; 2] {
    [
        ((p[0] + 0.5) / NORMALIZED_RANGE * f64::from(width)) as f32,
        ((p[1] + 0.5) / NORMALIZED_RANGE * f64::from(height)) as f32,
    ]
}

/// An image-space arrow for a top-down heading (image y points down).
fn heading_vector(heading_deg: f64) -> [f32; 2] {
    let (s, c) = heading_deg.to_radians().sin_cos();
    [-(s as f32) * HEADING_ARROW_PX, -(c as f32) * HEADING_ARROW_PX]
}

fn log_color(stream: &rerun::RecordingStream, path: &str, payload: ColorPayload) -> Result<(), VizError> {
    match payload {
        ColorPayload::Raw(image) => stream.log(path, &image)?,
        ColorPayload::Encoded(image) => stream.log(path, &image)?,
    }
    Ok(())
}

impl Recorder {
    /// Logs question `index` (the `question` timeline). What the previous question showed is cleared first,
    /// so a question without a current view or target shows none.
    pub fn log_question(&self, index: usize, question: &QuestionLog<'_>) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let encoding = self.images().rgb;
        let images: Vec<(ColorPayload, u32, u32, &str)> = question
            .images
            .iter()
            .map(|i| Ok((color_payload(i.image, encoding)?, i.image.width(), i.image.height(), i.name)))
            .collect::<Result<_, VizError>>()?;
        let view_image = match question.current_view.and_then(|v| v.image) {
            Some(image) => Some(color_payload(image, encoding)?),
            None => None,
        };
        let topdown = match &question.topdown {
            Some(t) => Some((color_payload(t.image, encoding)?, t)),
            None => None,
        };
        let text = question_markdown(question);

        let Some(stream) = self.at_question(index) else { return Ok(()) };
        stream.log(paths::QUESTION, &rerun::Clear::recursive())?;
        stream.log(paths::QUESTION_3D, &rerun::Clear::recursive())?;
        stream.log(
            paths::QUESTION_TEXT,
            &rerun::TextDocument::new(text).with_media_type(rerun::MediaType::markdown()),
        )?;

        let mut x = 0.0f32;
        for (k, (payload, width, height, name)) in images.into_iter().enumerate() {
            let path = format!("{}/{k}", paths::QUESTION_IMAGES);
            stream.log(path.as_str(), &rerun::Transform3D::from_translation([x, 0.0, 0.0]))?;
            log_color(stream, &path, payload)?;
            stream.log(
                path.as_str(),
                &rerun::Boxes2D::from_mins_and_sizes([[0.0, 0.0]], [[width as f32, height as f32]])
                    .with_labels([name]),
            )?;
            x += width as f32 + IMAGE_GAP_PX;
        }

        if let Some((payload, answer)) = topdown {
            let (w, h) = (answer.image.width(), answer.image.height());
            log_color(stream, paths::QUESTION_TOPDOWN, payload)?;
            for (path, point, heading, color, label) in [
                (
                    paths::QUESTION_TOPDOWN_PREDICTED,
                    answer.predicted,
                    answer.predicted_heading_deg,
                    PREDICTED_COLOR,
                    "predicted",
                ),
                (paths::QUESTION_TOPDOWN_TRUTH, answer.truth, answer.truth_heading_deg, TRUTH_COLOR, "truth"),
            ] {
                let Some(point) = point.filter(|p| p.iter().all(|v| v.is_finite())) else { continue };
                let pixel = pixel_from_normalized(point, w, h);
                stream.log(
                    path,
                    &rerun::Points2D::new([pixel])
                        .with_colors([rgb(color)])
                        .with_radii([TOPDOWN_POINT_PX])
                        .with_labels([label]),
                )?;
                if let Some(heading) = heading.filter(|h| h.is_finite()) {
                    stream.log(
                        path,
                        &rerun::Arrows2D::from_vectors([heading_vector(heading)])
                            .with_origins([pixel])
                            .with_colors([rgb(color)]),
                    )?;
                }
            }
        }

        let camera_position = question.current_view.map(|v| {
            let t = v.slam_from_camera.translation();
            [t.x, t.y, t.z]
        });
        if let Some(view) = &question.current_view {
            stream.log(paths::QUESTION_CAMERA, &transform(&view.slam_from_camera))?;
            stream.log(paths::QUESTION_CAMERA_IMAGE, &pinhole(&view.camera))?;
            if let Some(payload) = view_image {
                log_color(stream, paths::QUESTION_CAMERA_RGB, payload)?;
            }
        }
        for (path, point, color, label) in [
            (paths::QUESTION_TARGET, question.target, TARGET_COLOR, "target"),
            (paths::QUESTION_PREDICTED, question.predicted, PREDICTED_COLOR, "predicted"),
            (paths::QUESTION_TRUTH, question.truth, TRUTH_COLOR, "truth"),
        ] {
            let Some(point) = point.filter(finite3) else { continue };
            stream.log(
                path,
                &rerun::Points3D::new([point3(point)])
                    .with_colors([rgb(color)])
                    .with_radii([POINT_RADIUS_M])
                    .with_labels([label]),
            )?;
            if let (Some(origin), false) = (camera_position, path == paths::QUESTION_TARGET) {
                let vector = [point[0] - origin[0], point[1] - origin[1], point[2] - origin[2]];
                stream.log(
                    path,
                    &rerun::Arrows3D::from_vectors([point3(vector)])
                        .with_origins([point3(origin)])
                        .with_colors([rgb(color)])
                        .with_radii([ARROW_RADIUS_M]),
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_answers_verbatim_and_escapes_tags() {
        let texts = vec!["Where are you? Answer as <point>x y</point>.".to_string()];
        let question = QuestionLog {
            uid: "q1",
            task: "Self_Localization_Global_Position",
            texts: &texts,
            prediction: "<point>391 698</point>",
            ground_truth: "<point>400 700</point>",
            ..QuestionLog::default()
        };
        let md = question_markdown(&question);
        assert!(md.contains("\\<point>x y\\</point>"));
        assert!(md.contains("```text\n<point>391 698</point>\n```"));
    }

    #[test]
    fn normalised_points_and_headings_land_on_the_image() {
        let [u, v] = pixel_from_normalized([499.5, 0.0], 640, 512);
        assert!((u - 320.0).abs() < 1e-4 && (v - 0.256).abs() < 1e-6);
        let up = heading_vector(0.0);
        assert!(up[0].abs() < 1e-6 && up[1] < 0.0);
        let left = heading_vector(90.0);
        assert!(left[0] < 0.0 && left[1].abs() < 1e-4);
    }
}
