//! Input and output of the real binary: `-` (standard input), pipes, FIFOs and process
//! substitution for every file argument, the size limit on streams, a closed stdout, colour
//! only on a terminal, YAML syntax errors in `check`, and the small things of `--type`,
//! `explain` and `simulate`.

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};

use common::{Scratch, assert_exit, json, routechain, stderr, stdout, workspace};

const CHAIN: &str = "rules/examples/full.chain.yaml";
const PROVIDERS: &str = "rules/examples/providers.txt";
const REQUEST: &str = "rules/examples/request.json";
/// The route tables draw at random: seeded, every run routes alike (to 10.1.2.1).
const SEED: &str = "7";

/// `routechain ARGS` spawned in the workspace root with stdin, stdout and stderr piped.
fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .current_dir(workspace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn routechain")
}

/// Runs `routechain ARGS` with `input` on its standard input.
fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = spawn(args);
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Written from a thread: a command that stops reading early must not block the test.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for routechain");
    writer.join().unwrap();
    out
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(workspace().join(path)).unwrap()
}

#[test]
fn every_input_of_route_may_be_standard_input() {
    let want = stdout(&routechain(&[
        "route",
        "--seed",
        SEED,
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        REQUEST,
    ]));
    assert!(want.contains("\"providers\""), "{want}");
    for (i, path) in [CHAIN, PROVIDERS, REQUEST].into_iter().enumerate() {
        let mut inputs = [CHAIN, PROVIDERS, REQUEST];
        inputs[i] = "-";
        let out = with_stdin(
            &[
                "route",
                "--seed",
                SEED,
                "--chain",
                inputs[0],
                "--providers",
                inputs[1],
                "--request",
                inputs[2],
            ],
            &read(path),
        );
        assert_exit(&out, 0);
        assert_eq!(stdout(&out), want, "{path} on stdin");
    }
    // Standard input is read once: two arguments cannot both be `-`.
    let out = with_stdin(
        &[
            "route",
            "--chain",
            CHAIN,
            "--providers",
            "-",
            "--request",
            "-",
        ],
        b"",
    );
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("standard input (`-`) is given to --providers and --request"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_pipe_between_two_processes_feeds_the_provider_list() {
    // `cat providers.txt | routechain route --providers - …`, as `zk providers | …` would.
    let mut cat = Command::new("cat")
        .arg(workspace().join(PROVIDERS))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn cat");
    let out = Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args([
            "route",
            "--seed",
            SEED,
            "--chain",
            CHAIN,
            "--providers",
            "-",
            "--request",
            REQUEST,
        ])
        .current_dir(workspace())
        .stdin(cat.stdout.take().unwrap())
        .output()
        .unwrap();
    cat.wait().unwrap();
    assert_exit(&out, 0);
    assert_eq!(json(&out)["providers"][0]["address"], "10.1.2.1:20880");
}

#[test]
fn process_substitution_and_fifos_are_read() {
    // bash's `<(…)`: /dev/fd/N, a pipe.
    let script = format!(
        "exec {bin} route --seed {SEED} --chain <(cat {CHAIN}) --providers <(cat {PROVIDERS}) --request <(cat {REQUEST})",
        bin = env!("CARGO_BIN_EXE_routechain")
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(json(&out)["providers"][0]["address"], "10.1.2.1:20880");

    // A FIFO made with mkfifo, written by another thread.
    let s = Scratch::new("io-fifo");
    let fifo = s.path("request.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        let request = read(REQUEST);
        std::thread::spawn(move || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .unwrap()
                .write_all(&request)
                .unwrap();
        })
    };
    let out = routechain(&[
        "route",
        "--seed",
        SEED,
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        &fifo,
    ]);
    writer.join().unwrap();
    assert_exit(&out, 0);
    assert_eq!(json(&out)["providers"][0]["address"], "10.1.2.1:20880");
}

#[test]
fn check_test_and_zk_put_rule_read_standard_input() {
    let out = with_stdin(&["check", "-"], &read(CHAIN));
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("<stdin>: ok (4 routers)"),
        "{}",
        stdout(&out)
    );
    let out = with_stdin(&["check", "--type", "condition", "-"], b"conditions: []\n");
    assert_exit(&out, 2);
    assert!(
        stdout(&out).contains("<stdin>:1:13: error[RC002]: "),
        "{}",
        stdout(&out)
    );
    // `test -`: the cases' files relative to the working directory.
    let cases = String::from_utf8(read("rules/examples/CASES.yaml"))
        .unwrap()
        .replace("chain: full.chain.yaml", &format!("chain: {CHAIN}"))
        .replace(
            "providers: providers.txt",
            &format!("providers: {PROVIDERS}"),
        );
    let out = with_stdin(&["test", "-"], cases.as_bytes());
    assert_exit(&out, 0);
    assert!(stdout(&out).contains(" 0 failed"), "{}", stdout(&out));
    // `zk put-rule -`: validated before connecting (nothing listens on port 1).
    let out = with_stdin(
        &[
            "zk",
            "put-rule",
            "--zookeeper",
            "127.0.0.1:1",
            "--key",
            "com.foo.BarService::",
            "--type",
            "condition",
            "-",
        ],
        b"conditions: []\n",
    );
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("<stdin>:1:13:"), "{}", stderr(&out));
}

#[test]
fn a_stream_past_the_size_limit_is_refused_and_devices_still_are() {
    // An endless stream: stopped at the limit, for a request and for a provider list.
    for args in [
        ["--chain", CHAIN, "--providers", PROVIDERS, "--request", "-"],
        ["--chain", CHAIN, "--providers", "-", "--request", REQUEST],
    ] {
        let mut child = spawn(&[&["--max-file-size", "1KiB", "route"][..], &args[..]].concat());
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let line = [b'#'; 4096];
            // Until the reader closes the pipe.
            while stdin.write_all(&line).is_ok() {}
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert_exit(&out, 2);
        assert!(
            stderr(&out).contains("<stdin>:1:1: cannot read: larger than the limit of 1024 bytes"),
            "{}",
            stderr(&out)
        );
    }
    let out = routechain(&[
        "route",
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        "/dev/zero",
    ]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("/dev/zero:1:1: cannot read: not a regular file or a pipe"),
        "{}",
        stderr(&out)
    );
}

/// Runs `routechain ARGS` with its stdout closed before it writes (the request arrives on
/// stdin after the reader is gone): `routechain … | head -0`.
fn with_closed_stdout(args: &[&str], input: &[u8]) -> (Option<i32>, String) {
    let mut child = spawn(args);
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_status_0() {
    let request = read(REQUEST);
    let cases: Vec<(Vec<&str>, &[u8])> = vec![
        (
            vec![
                "route",
                "--chain",
                CHAIN,
                "--providers",
                PROVIDERS,
                "--request",
                "-",
            ],
            &request,
        ),
        (
            vec![
                "explain",
                "--format",
                "json",
                "--chain",
                CHAIN,
                "--providers",
                PROVIDERS,
                "--request",
                "-",
            ],
            &request,
        ),
        (
            vec![
                "explain",
                "--chain",
                CHAIN,
                "--providers",
                PROVIDERS,
                "--request",
                "-",
            ],
            &request,
        ),
        (
            vec![
                "simulate",
                "--chain",
                CHAIN,
                "--providers",
                PROVIDERS,
                "--request",
                "-",
                "--format",
                "table",
            ],
            &request,
        ),
        (vec!["check", "--format", "json", "-"], b"routers: []\n"),
        (vec!["completions", "bash"], b""),
        (vec!["check", "--help"], b""),
    ];
    for (args, input) in cases {
        let (code, err) = with_closed_stdout(&args, input);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
    }
    // `| head -1` through a real pipe: the first line, then the pipe closes.
    let script = format!(
        "{bin} route --chain {CHAIN} --providers {PROVIDERS} --request {REQUEST} --explain | head -1; \
         echo \"status ${{PIPESTATUS[0]}}\"",
        bin = env!("CARGO_BIN_EXE_routechain")
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(workspace())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "{\nstatus 0\n");
    assert_eq!(stderr(&out), "");
}

#[test]
fn check_reports_yaml_syntax_errors_where_route_does() {
    let s = Scratch::new("io-syntax");
    let tab = "service: x\nrouters:\n  - type: condition\n    rule:\n\tconditions: []\n";
    let open = "routers: [\n  {type: condition\n";
    for (name, text, at) in [
        ("tab.chain.yaml", tab, "5:2"),
        ("open.chain.yaml", open, "3:1"),
        // A rule file, typed by its name or not at all.
        (
            "com.foo.BarService::.condition-router.yaml",
            "conditions:\n\t- a\n",
            "2:2",
        ),
        ("rule.yaml", "conditions: [\n", "2:1"),
    ] {
        let path = s.write(name, text);
        let path = path.to_str().unwrap();
        let out = routechain(&["check", path]);
        assert_exit(&out, 2);
        let text = stdout(&out);
        assert!(
            text.contains(&format!("{path}:{at}: error[RC002]: ")),
            "{name}: {text}"
        );
        assert!(!text.contains("RC003"), "{name}: {text}");
        if name.contains("chain") {
            // The very message `route` gives.
            let route = routechain(&[
                "route",
                "--chain",
                path,
                "--providers",
                PROVIDERS,
                "--request",
                REQUEST,
            ]);
            let first = stderr(&route).lines().next().unwrap().to_string();
            let message = first.strip_prefix(&format!("{path}:{at}: ")).unwrap();
            assert!(
                text.contains(&format!("{path}:{at}: error[RC002]: {message}")),
                "{text}\nroute: {first}"
            );
        }
    }
}

#[test]
fn check_type_lists_and_completes_the_known_types_and_applies_to_the_files_after_it() {
    let help = stdout(&routechain(&["check", "--help"]));
    assert!(
        help.contains(
            "[possible values: affinity, condition, configurators, group, idc-weight, mesh, mock, tag]"
        ),
        "{help}"
    );
    let bash = stdout(&routechain(&["completions", "bash"]));
    assert!(
        bash.contains("affinity condition configurators group idc-weight mesh mock tag"),
        "the bash script does not complete --type's values"
    );
    let s = Scratch::new("io-types");
    let tag = s.write(
        "a.yaml",
        "key: app\ntags:\n  - name: gray\n    addresses: [\"10.0.0.1:20880\"]\n",
    );
    let cond = s.write("b.yaml", "conditions:\n  - => region = hz\n");
    let (tag, cond) = (tag.to_str().unwrap(), cond.to_str().unwrap());
    let out = routechain(&["check", "--type", "tag", tag, "--type", "condition", cond]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains(&format!("{tag}: ok (tag rule)")), "{text}");
    assert!(
        text.contains(&format!("{cond}: ok (condition rule)")),
        "{text}"
    );
    // One `--type` after the files applies to all of them.
    let out = routechain(&["check", cond, cond, "--type", "condition"]);
    assert_exit(&out, 0);
    // A `--type` that comes after the last file while another came before applies to none.
    let out = routechain(&["check", "--type", "tag", tag, "--type", "condition"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("`--type condition` comes after the last file"),
        "{}",
        stderr(&out)
    );
    // `zk`: an unknown type is said so, with the known ones, before connecting.
    let out = routechain(&[
        "zk",
        "get-rule",
        "--zookeeper",
        "127.0.0.1:1",
        "--key",
        "app",
        "--type",
        "idc_weight",
    ]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("unknown rule type `idc_weight`, expected one of `affinity`,")
            && stderr(&out).contains("; did you mean `idc-weight`?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn explain_fits_80_columns_and_simulate_calls_0_has_no_dangling_bar() {
    let out = routechain(&[
        "explain",
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        REQUEST,
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    // The reasons are all there, wrapped inside their column.
    assert!(
        text.contains("  no request tag:\n") && text.contains("  providers in no\n"),
        "{text}"
    );
    let out = routechain(&[
        "simulate",
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        REQUEST,
        "--calls",
        "0",
        "--format",
        "table",
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("#   address   count   share\n--- --------- ------- -----\n"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.ends_with(" -")), "{text}");
}

#[test]
fn colour_on_a_terminal_only_and_never_with_no_color() {
    let s = Scratch::new("io-colour");
    let bad = s.write("bad.chain.yaml", "routers:\n  - type: conditon\n");
    let warn = s.write(
        "warn.chain.yaml",
        "routers:\n  - type: condition\n    rule: {conditions: [\"=> region = hz\"], priorty: 1}\n",
    );
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_routechain"));
        c.args(args).current_dir(workspace());
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let check = ["check", bad.to_str().unwrap(), warn.to_str().unwrap()];
    let explain = [
        "explain",
        "--chain",
        CHAIN,
        "--providers",
        PROVIDERS,
        "--request",
        REQUEST,
    ];
    let route_error = [
        "route",
        "--chain",
        bad.to_str().unwrap(),
        "--providers",
        PROVIDERS,
        "--request",
        REQUEST,
    ];
    // Piped: no escape codes.
    for args in [&check[..], &explain, &route_error] {
        let out = run(&[], args);
        assert!(!out.stdout.contains(&0x1b), "{args:?}: {}", stdout(&out));
        assert!(!out.stderr.contains(&0x1b), "{args:?}: {}", stderr(&out));
    }
    // Forced (as on a terminal): errors red, warnings yellow, the table's header bold.
    let forced = [("CLICOLOR_FORCE", "1")];
    let text = stdout(&run(&forced, &check));
    assert!(
        text.contains("\x1b[1m\x1b[31merror[RC002]\x1b[0m"),
        "{text:?}"
    );
    assert!(text.contains("\x1b[1m\x1b[33mwarning["), "{text:?}");
    let text = stdout(&run(&forced, &explain));
    assert!(text.starts_with("\x1b[1m#   router"), "{text:?}");
    let text = stderr(&run(&forced, &route_error));
    assert!(text.starts_with("\x1b[1m\x1b[31m"), "{text:?}");
    // NO_COLOR wins.
    let out = run(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], &check);
    assert!(!out.stdout.contains(&0x1b), "{}", stdout(&out));
    // A real terminal: `script` runs the command on a pseudo-terminal.
    let script = format!("{} {}", env!("CARGO_BIN_EXE_routechain"), check.join(" "));
    let out = Command::new("script")
        .args(["-qec", &script, "/dev/null"])
        .current_dir(workspace())
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let text = stdout(&out);
    assert!(text.contains("\x1b[1m\x1b[31merror[RC002]"), "{text:?}");
}
