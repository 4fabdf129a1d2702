//! The edges of gst: image files and videos through OpenCV's codecs, atomic file writes, calibration files
//! (OpenCV FileStorage, ROS camera_info, Kalibr camchain), undistortion, TUM RGB-D datasets, GST question
//! files, and frame sources (TUM RGB-D directories, generated episodes, image folders, videos) behind one
//! pull trait, [`FrameSource`], which is all a SLAM front end needs.
//!
//! Every error names the file it concerns. Writers never leave a half-written file behind: they encode in
//! memory, write a temporary file in the destination directory and rename it into place.

pub mod calibration;
pub mod error;
pub mod gst;
pub mod images;
pub mod source;
pub mod tum;
pub mod undistort;
pub mod video;
pub mod write;

pub use calibration::{CalibrationFormat, parse_calibration, read_calibration, read_calibration_with_format};
pub use error::IoError;
pub use gst::{
    QuestionFile, QuestionFileError, QuestionReadOptions, read_bench_questions, read_question,
    read_question_dir, write_question,
};
pub use images::{
    decode_gray16, decode_rgb, encode_gray16_png, encode_jpeg, read_depth_png, read_gray, read_instance_png,
    read_rgb, write_depth_png, write_gray_png, write_instance_png, write_rgb_png,
};
pub use source::{
    DEFAULT_IMAGE_FOLDER_FPS, FrameSource, FrameTiming, ImageFolderSource, SOURCE_CALIBRATION_FILE,
    SourceKind, SourceOptions, TumSource, VideoSource, generated_episode_dir, ground_truth_at,
    open_generated_episode, open_source, open_source_with,
};
pub use tum::{
    TUM_DEFAULT_DEPTH_SCALE, TUM_MAX_DIFFERENCE_S, TumEntry, TumFrame, TumSequence, TumWriter, associate,
    parse_list, parse_trajectory_tum, read_trajectory_tum, write_trajectory_tum,
};
pub use undistort::Undistorter;
pub use video::{VideoReader, VideoWriter, read_video};
pub use write::{atomic_write, write_json};
