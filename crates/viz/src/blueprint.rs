//! The default viewer layout, built with the Rust blueprint API and sent with every recording.
//!
//! Rerun stores a blueprint as its own store beside the recording's; `RecordingStreamBuilder::with_blueprint`
//! sends it through the recording's sink before any data, so an `.rrd` file carries it at its start and a
//! spawned viewer receives it first. It is sent active and default: the viewer shows it at once, and
//! "reset blueprint" comes back to it after the user rearranged the views.

use rerun::blueprint::components::{PanelState, PlayState};
use rerun::blueprint::{
    Blueprint, BlueprintPanel, ContainerLike, GraphView, Horizontal, SelectionPanel, Spatial2DView,
    Spatial3DView, Tabs, TextDocumentView, TextLogView, TimePanel, TimeSeriesView, Vertical,
};

use crate::paths;

/// The layout: the 3D world (scene, cameras, trajectories, map) beside the camera's images (colour, depth,
/// instances); under them the map (top-down and room graph) and the question panel (text, images, top-down
/// answer); the tracking series and text log along the bottom of the 3D view. The time panel starts on the
/// `frame` timeline at the latest frame (a recording opens on the whole trajectory and map; press play to
/// replay it), and the blueprint and selection panels start collapsed so that the views get the window.
pub fn default_blueprint() -> Blueprint {
    let world = Spatial3DView::new("world").with_origin(paths::WORLD);
    let camera_view = |name: &str, child: &str| -> ContainerLike {
        Spatial2DView::new(name)
            .with_origin(paths::CAMERA_IMAGE)
            .with_contents([format!("$origin/{child}")])
            .into()
    };
    let camera = Horizontal::new([
        camera_view("rgb", "rgb"),
        camera_view("depth", "depth"),
        camera_view("instances", "instances"),
    ]);
    let map = Tabs::new([
        Spatial2DView::new("top-down map").with_origin(paths::TOPDOWN).into(),
        GraphView::new("room graph").with_origin(paths::ROOM_GRAPH).into(),
    ]);
    let question = Horizontal::new([
        TextDocumentView::new("question").with_origin(paths::QUESTION_TEXT).into(),
        Tabs::new([
            Spatial2DView::new("question images").with_origin(paths::QUESTION_IMAGES).into(),
            Spatial2DView::new("answer on the top-down").with_origin(paths::QUESTION_TOPDOWN).into(),
        ])
        .into(),
    ]);
    let metrics = Tabs::new([
        TimeSeriesView::new("tracking").with_origin(paths::METRICS).into(),
        TextLogView::new("tracking log").with_origin("logs").into(),
    ]);
    let left = Vertical::new([world.into(), metrics.into()]).with_row_shares([3.0f32, 1.0]);
    let right =
        Vertical::new([camera.into(), map.into(), question.into()]).with_row_shares([1.0f32, 1.2, 1.0]);
    Blueprint::new(Horizontal::new([left.into(), right.into()]).with_column_shares([1.3f32, 1.0]))
        .with_time_panel(
            TimePanel::new().with_timeline(paths::TIMELINE_FRAME).with_play_state(PlayState::Following),
        )
        .with_blueprint_panel(BlueprintPanel::new().with_state(PanelState::Collapsed))
        .with_selection_panel(SelectionPanel::new().with_state(PanelState::Collapsed))
}
