//! Rerun logging of every gst stage.
