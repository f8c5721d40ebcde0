//! The `cargo xtask` binary's argument handling, offline and without root: nothing here reaches
//! the sid root or the network.

use std::process::Command;

fn xtask(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env_remove("DAWN_COMPUTE_SYSROOT")
        .output()
        .expect("running xtask")
}

#[test]
fn an_unknown_subcommand_fails_with_a_clear_message() {
    let out = xtask(&["frobnicate"]);
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unrecognized subcommand 'frobnicate'"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn no_subcommand_fails_and_lists_the_subcommands() {
    let out = xtask(&[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in ["env", "shell", "test", "run", "bundle"] {
        assert!(stderr.contains(name), "{name} missing from:\n{stderr}");
    }
}

#[test]
fn help_succeeds() {
    let out = xtask(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("bundle"));
}

#[test]
fn bundle_refuses_a_bad_bin_before_doing_anything() {
    let out = xtask(&["bundle", "--bin", "../..", "--out", "/nonexistent/out"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a binary's name"), "{stderr}");
}
