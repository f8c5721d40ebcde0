//! The test bench of `ggml-dawn`, apart from the library: upstream's case strings ([`cases`])
//! and case lists ([`case_lists`]), the harness that runs them against the CPU reference and
//! times them ([`harness`]), ggml's golden files ([`golden`]), the comparison with upstream's
//! `test-backend-ops` and between two runs ([`compare`]), the named benchmark suites
//! ([`suites`]), and the `backend-ops` tool built on them.

pub mod case_lists;
pub mod cases;
pub mod compare;
pub mod golden;
pub mod harness;
/// Regular files only, never a wait: the library's reader, shared with the tool.
pub use ggml_dawn::input_file;
pub mod progress;
mod reference_checks;
pub mod selfcheck;
pub mod suites;
