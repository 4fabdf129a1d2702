//! Question texts in GST-Bench's wording. Where the release shows a sample, the text is the sample's
//! verbatim; for the tasks it does not show (GP, Ori) the wording follows the same style. Texts interleave
//! with the media as in the release: `texts[0]`, the video, then each further text followed by its image.

use gst_core::TaskId;

pub const VIDEO_WHOLE: &str = "This is the exploration video of you in the entire scene earlier:";
pub const VIDEO_WHOLE_PERIOD: &str = "This is the exploration video of you in the entire scene earlier.";
pub const VIDEO_SECTION: &str = "This is the exploration video in a section of the scene earlier:";
pub const VIDEO_CLIP: &str = "This is a short video of you in the scene earlier.";
pub const CURRENT_VIEW: &str = "Your current view is :";
pub const TOPDOWN: &str = "The top-down image of the scene is:";
pub const OPTION_B: &str = "\nB.";
pub const OPTION_C: &str = "\nC.";
pub const OPTION_D: &str = "\nD.";

/// How the target object is referred to: marked in the video, or named.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    Marked,
    Named(&'a str),
}

impl Target<'_> {
    fn phrase(&self) -> String {
        match self {
            Target::Marked => "the object marked with a red box in the video".to_string(),
            Target::Named(name) => format!("the {name}"),
        }
    }
}

pub fn direction(target: Target<'_>) -> String {
    format!(
        "In which direction relative to you is {}? Taking your current viewing direction as 0°, with left turns being positive, please only give the angle as an integer between –180° and 180°, without the \"°\" symbol.",
        target.phrase()
    )
}

pub fn distance(target: Target<'_>) -> String {
    format!(
        "How far in meters is {} from you? Answer only with a number rounded to one decimal place, without the \"m\" suffix.",
        target.phrase()
    )
}

pub fn global_position(target: Target<'_>) -> String {
    format!(
        "Where on the top-down image is {} located?\nPlease provide coordinates normalized to the range [0, 999], with the x-axis pointing to the right of the top-down image and the y-axis pointing to the bottom of the top-down image.\nPlease provide the answer directly in the format <point>x y</point>.",
        target.phrase()
    )
}

pub const SELF_POSITION: &str = "Where on the top-down image does your current location correspond to?\nPlease provide coordinates normalized to the range [0, 999], with the x-axis pointing to the right of the top-down image and the y-axis pointing to the bottom of the top-down image.\nPlease provide the answer directly in the format <point>x y</point>.";

pub const SELF_ORIENTATION: &str = "Which direction on the top-down image are you currently facing? Taking the direction towards the top of the top-down image as 0°, with counter-clockwise rotations being positive, please only give the angle as an integer between –180° and 180°, without the \"°\" symbol.";

pub const TOPDOWN_SELECTION: &str = "Among the four images below, which one is closest to a top-down view of the entire scene? Please directly answer with the letter of the correct option.\nA.";

pub const TRAJECTORY_SELECTION: &str = "Which of the four red trajectories on the top-down maps best matches the path shown in the video? Note that the blue dot marks the starting point of each trajectory. Please directly answer with the letter of the correct option.\nA.";

/// The texts of a self-localisation question: video, current view, top-down, then the question.
pub fn self_localization(question: &str) -> Vec<String> {
    vec![VIDEO_WHOLE.into(), CURRENT_VIEW.into(), TOPDOWN.into(), question.into()]
}

/// The texts of a multiple-choice question with four image options.
pub fn options(intro: &str, question: &str) -> Vec<String> {
    vec![intro.into(), question.into(), OPTION_B.into(), OPTION_C.into(), OPTION_D.into()]
}

/// The short id used in uids.
pub fn short(task: TaskId) -> &'static str {
    task.column()
}
