//! A progress bar for long lists of cases: the count, failures so far and the time left, on
//! standard error when it is a terminal. Lines printed through [`Progress::println`] go to
//! standard output above the bar; without a bar they are printed as they are.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over `len` cases.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    failed: u64,
}

impl Progress {
    /// A bar when `wanted` (text output) and standard error is a terminal; otherwise nothing is
    /// drawn.
    pub fn new(len: usize, wanted: bool) -> Progress {
        let bar = (wanted && len > 1 && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(len as u64);
            let style = ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} cases, {msg}, {eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_message("0 failed");
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Progress { bar, failed: 0 }
    }

    /// Prints a line of output (above the bar, if there is one).
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{}", line.as_ref())),
            None => println!("{}", line.as_ref()),
        }
    }

    /// One case done; `failed` if it failed.
    pub fn advance(&mut self, failed: bool) {
        self.failed += u64::from(failed);
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} failed", self.failed));
            bar.inc(1);
        }
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
