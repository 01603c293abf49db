//! Progress on a terminal, silence elsewhere: indicatif draws only when stderr is a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner with a message, ticking on its own until finished.
pub fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
