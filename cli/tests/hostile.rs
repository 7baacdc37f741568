//! Hostile input, through the real `routechain` binary: every error located exactly (inside
//! every YAML scalar style, with escapes, in invalid UTF-8), output bounded, input files read
//! only when they are regular files within the size limit, one byte-order-mark policy,
//! plugin paths resolved against the chain file, range and field-path messages, and no
//! colour in piped output. (Speed under hostile input is measured in criterion benchmarks.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A throwaway directory for one test's files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("routechain-hostile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn write(&self, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `routechain ARGS` in `dir` with stdout and stderr piped.
fn routechain_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run routechain")
}

/// Everything the command printed: `check` reports problems on stdout, the other commands
/// on stderr.
fn stderr(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// True when `text` has a line with the location `at` (`file:line:column:`) and `message`
/// after it (`check` puts `error[CODE]: ` between them).
fn has_problem(text: &str, at: &str, message: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with(at) && l[at.len()..].contains(message))
}

/// The first `ORIGIN:LINE:COLUMN:` of `stderr` for `origin`.
fn first_location(stderr: &str, origin: &str) -> (usize, usize) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("{origin}:")))
        .unwrap_or_else(|| panic!("no location in {origin}: {stderr}"));
    let mut parts = line[origin.len() + 1..].splitn(3, ':');
    let line = parts.next().unwrap().parse().unwrap();
    let column = parts.next().unwrap().parse().unwrap();
    (line, column)
}

/// The character at 1-based `line`:`column` of `text`.
fn char_at(text: &str, (line, column): (usize, usize)) -> Option<char> {
    text.lines().nth(line - 1)?.chars().nth(column - 1)
}

const CONDITION_CHAIN_HEAD: &str = "routers:\n  - type: condition\n    rule:\n      conditions:\n";

/// A condition with a mistake (`==`) placed in every YAML scalar style: the reported line
/// and column are those of the `==` in the file, whatever the style.
#[test]
fn errors_inside_multi_line_and_escaped_strings_point_at_the_offending_token() {
    let s = Scratch::new("styles");
    let cases = [
        (
            "folded",
            "        - >\n          host = 1\n          & b == c => x = y\n",
        ),
        (
            "literal",
            "        - |\n          host = 1 & b == c => x = y\n",
        ),
        (
            "literal-later-line",
            "        - |\n          host = 1\n          & b == c => x = y\n",
        ),
        ("plain", "        - host = 1\n          & b == c => x = y\n"),
        (
            "single",
            "        - 'host = 1\n          & b == c => x = y'\n",
        ),
        (
            "double-continued",
            "        - \"host = 1 \\\n          & b == c => x = y\"\n",
        ),
        ("escapes", "        - \"a\\t\\t\\t\\t = b & c == d\"\n"),
        (
            "unicode-escapes",
            "        - \"a = \\u00e9\\x41 & c == d\"\n",
        ),
        ("quote-escape", "        - 'a = ''b'' & c == d'\n"),
    ];
    for (name, conditions) in cases {
        let text = format!("{CONDITION_CHAIN_HEAD}{conditions}");
        let file = format!("{name}.chain.yaml");
        s.write(&file, &text);
        let out = routechain_in(&s.0, &["check", &file]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        let at = first_location(&err, &file);
        let line = text.lines().nth(at.0 - 1).unwrap_or_default();
        assert!(
            char_at(&text, at) == Some('=') && char_at(&text, (at.0, at.1 + 1)) == Some('='),
            "{name}: {at:?} is not on the `==` of {line:?}:\n{err}"
        );
        // The caret under the excerpt sits under the `==` too.
        let mut lines = err
            .lines()
            .skip_while(|l| !l.starts_with(&format!("{file}:")))
            .skip(1);
        let (excerpt, caret) = (lines.next().unwrap(), lines.next().unwrap());
        let caret_at = caret.chars().position(|c| c == '^').unwrap();
        assert_eq!(
            excerpt.chars().nth(caret_at),
            Some('='),
            "{name}:\n{excerpt}\n{caret}"
        );
    }
}

/// `text` with every line break (`\r\n`, lone `\r`) written `\n`: the lines YAML sees,
/// at the same lines and columns.
fn yaml_lines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Every `ORIGIN:LINE:COLUMN:` of `output` for `origin`.
fn all_locations(output: &str, origin: &str) -> Vec<(usize, usize)> {
    output
        .lines()
        .filter_map(|l| {
            let mut parts = l.strip_prefix(&format!("{origin}:"))?.splitn(3, ':');
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

/// Lone `\r` line breaks (old Mac line ends) and `\r\n` count as YAML counts them: a
/// problem is located at its line and column in the file, never past its end (the fuzz
/// finding: `33:15` in a file of 2 `\n`-lines).
#[test]
fn lone_cr_line_breaks_are_counted_as_yaml_counts_them() {
    let s = Scratch::new("cr");
    let body = format!("{CONDITION_CHAIN_HEAD}        - host = 1 & b == c => x = y\n");
    for (name, text) in [
        ("cr", body.replace('\n', "\r")),
        ("crlf", body.replace('\n', "\r\n")),
        ("mixed", body.replacen('\n', "\r", 2).replacen('\n', "\r\n", 1)),
        (
            "cr-literal",
            format!("{CONDITION_CHAIN_HEAD}        - |\n          host = 1\n          & b == c => x = y\n")
                .replace('\n', "\r"),
        ),
    ] {
        let file = format!("{name}.chain.yaml");
        s.write(&file, &text);
        let out = routechain_in(&s.0, &["check", &file]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        let at = first_location(&err, &file);
        let lines = yaml_lines(&text);
        assert!(
            char_at(&lines, at) == Some('=') && char_at(&lines, (at.0, at.1 + 1)) == Some('='),
            "{name}: {at:?} is not on the `==`:\n{err}"
        );
        assert!(err.contains("& b == c"), "{name}: no excerpt of the line:\n{err}");
    }
    // The fuzz finding itself: a key, 31 lone `\r`, more text; every location inside it.
    let text = "configVersiov!=g\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\r\rray\n     we$gHt: 101\n";
    s.write("finding.chain.yaml", text);
    let out = routechain_in(&s.0, &["check", "finding.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<String> = yaml_lines(text).lines().map(str::to_string).collect();
    let found = all_locations(&err, "finding.chain.yaml");
    assert!(!found.is_empty(), "{err}");
    for (line, column) in found {
        let width = lines.get(line - 1).map_or(0, |l| l.chars().count());
        assert!(
            line <= lines.len() + 1 && column <= width + 1,
            "{line}:{column} outside the file ({} lines):\n{err}",
            lines.len()
        );
    }
}

#[test]
fn invalid_utf8_is_located_at_the_bad_byte_in_chain_and_rule_files() {
    let s = Scratch::new("utf8");
    s.write(
        "bad.chain.yaml",
        b"routers:\n  - type: condition\n    rule:\n      conditions:\n        - \"a = \xff\"\n",
    );
    let out = routechain_in(&s.0, &["check", "bad.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        has_problem(&err, "bad.chain.yaml:5:16:", "invalid UTF-8: byte 0xff"),
        "{err}"
    );

    s.write("bad.rule.yaml", b"force: false\ntags:\n  - name: \xc3\n");
    s.write(
        "rule.chain.yaml",
        "routers:\n  - type: tag\n    rule_file: bad.rule.yaml\n",
    );
    let out = routechain_in(&s.0, &["check", "rule.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        has_problem(&err, "bad.rule.yaml:3:11:", "invalid UTF-8"),
        "{err}"
    );
}

/// One condition line with 2,000 mistakes: at most 100 problems printed, then a count, each
/// excerpt cut around its column (not the whole 66 KB line once per problem).
#[test]
fn problem_output_is_bounded_per_file_and_excerpts_are_cut_around_the_column() {
    let s = Scratch::new("bounded");
    let terms: Vec<String> = (0..2000).map(|i| format!("k{i} == v{i}")).collect();
    let text = format!(
        "{CONDITION_CHAIN_HEAD}        - \"{} => a = b\"\n",
        terms.join(" & ")
    );
    s.write("many.chain.yaml", &text);
    let out = routechain_in(&s.0, &["check", "many.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.len() < 80_000, "{} bytes of stderr", err.len());
    assert_eq!(err.matches("many.chain.yaml:5:").count(), 100, "{err}");
    assert!(
        err.contains("… and 1900 more problem(s) in many.chain.yaml"),
        "{err}"
    );
    assert!(err.lines().all(|l| l.chars().count() < 400), "{err}");
    // Each excerpt still shows its own token above the caret.
    let at = first_location(&err, "many.chain.yaml");
    assert_eq!(char_at(&text, at), Some('='));
}

/// `rule_file: /dev/zero` or a FIFO is refused at once; a file over the limit is refused
/// with the limit in the message, and the limit is configurable.
#[test]
fn only_regular_files_within_the_size_limit_are_read() {
    let s = Scratch::new("limits");
    s.write(
        "zero.chain.yaml",
        "routers:\n  - type: tag\n    rule_file: /dev/zero\n",
    );
    let out = routechain_in(&s.0, &["check", "zero.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        has_problem(
            &err,
            "zero.chain.yaml:3:16:",
            "routers[0].rule_file: cannot read rule file /dev/zero: not a regular file"
        ),
        "{err}"
    );

    let fifo = s.path("rule.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    s.write(
        "fifo.chain.yaml",
        "routers:\n  - type: tag\n    rule_file: rule.fifo\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_routechain"))
        .args(["check", "fifo.chain.yaml"])
        .current_dir(&s.0)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("check blocked on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(2));

    // Over the default 16 MiB: refused before reading, naming the limit.
    let big = vec![b'#'; 17 * 1024 * 1024];
    s.write("big.rule.yaml", &big);
    s.write(
        "big.chain.yaml",
        "routers:\n  - type: tag\n    rule_file: big.rule.yaml\n",
    );
    let out = routechain_in(&s.0, &["check", "big.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "larger than the limit of 16777216 bytes (16 MiB); raise it with --max-file-size"
        ),
        "{err}"
    );
    // A lower limit applies to the chain file itself.
    let out = routechain_in(
        &s.0,
        &["--max-file-size", "40B", "check", "zero.chain.yaml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        has_problem(
            &stderr(&out),
            "zero.chain.yaml:1:1:",
            "cannot read: larger than the limit of 40 bytes; raise it with --max-file-size"
        ),
        "{}",
        stderr(&out)
    );
}

/// A byte-order mark is accepted in every input file: chain, rule file, providers, request.
#[test]
fn a_byte_order_mark_is_accepted_in_every_input_file() {
    let s = Scratch::new("bom");
    let bom = "\u{feff}";
    s.write(
        "tag.rule.yaml",
        format!("{bom}force: false\ntags:\n  - name: gray\n    addresses: [\"10.0.0.2:20880\"]\n"),
    );
    s.write(
        "bom.chain.yaml",
        format!("{bom}routers:\n  - type: tag\n    rule_file: tag.rule.yaml\n"),
    );
    s.write(
        "providers.txt",
        format!("{bom}dubbo://10.0.0.1:20880/s\ndubbo://10.0.0.2:20880/s\n"),
    );
    s.write(
        "request.json",
        format!("{bom}{{\"attachments\": {{\"dubbo.tag\": \"gray\"}}}}"),
    );
    let out = routechain_in(
        &s.0,
        &[
            "route",
            "--chain",
            "bom.chain.yaml",
            "--providers",
            "providers.txt",
            "--request",
            "request.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["providers"][0]["address"], "10.0.0.2:20880");
    assert_eq!(v["providers"].as_array().unwrap().len(), 1);
}

/// An override file a chain names under `overrides:` is read as every other input: only
/// a regular file (`/dev/zero` is refused, located at its name in the chain file), within
/// the size limit, with a byte-order mark accepted.
#[test]
fn override_files_are_read_as_every_input_file() {
    let s = Scratch::new("overrides");
    s.write(
        "zero.chain.yaml",
        "overrides: [/dev/zero]\nrouters:\n  - type: group\n",
    );
    let out = routechain_in(&s.0, &["check", "zero.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        has_problem(
            &err,
            "zero.chain.yaml:1:13:",
            "overrides[0]: cannot read override file /dev/zero: not a regular file"
        ),
        "{err}"
    );
    s.write(
        "o.configurators.yaml",
        "\u{feff}# An override rule of more than 100 bytes, with a byte-order mark.\nconfigVersion: v3.0\nscope: service\nkey: k\nconfigs:\n  - side: consumer\n    parameters: {timeout: 1000}\n",
    );
    s.write(
        "bom.chain.yaml",
        "overrides: [o.configurators.yaml]\nrouters:\n  - type: group\n",
    );
    let out = routechain_in(&s.0, &["check", "bom.chain.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = routechain_in(
        &s.0,
        &["--max-file-size", "100B", "check", "bom.chain.yaml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "cannot read override file o.configurators.yaml: larger than the limit of 100 bytes"
        ),
        "{}",
        stderr(&out)
    );
}

/// A bare plugin `path` is the file next to the chain file, never a name for the system
/// library search: `check chain.yaml` and `check ./chain.yaml` load the same file.
#[test]
fn a_plugin_path_is_resolved_against_the_chain_file_directory() {
    let s = Scratch::new("plugin-path");
    s.write("libnot_a_plugin.so", "plain text, not a shared library\n");
    s.write(
        "chain.yaml",
        "routers:\n  - type: plugin\n    path: libnot_a_plugin.so\n",
    );
    let library = std::fs::canonicalize(s.0.join("libnot_a_plugin.so")).unwrap();
    for chain in ["chain.yaml", "./chain.yaml"] {
        let out = routechain_in(&s.0, &["check", chain]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "routers[0].path: cannot load plugin library {}",
                s.0.join("libnot_a_plugin.so").display()
            )) || err.contains(&format!(
                "routers[0].path: cannot load plugin library {}",
                library.display()
            )),
            "{chain}: {err}"
        );
        assert!(!err.contains("No such file"), "{chain}: {err}");
    }
}

#[test]
fn an_out_of_range_priority_says_which_range() {
    let s = Scratch::new("range");
    s.write(
        "prio.chain.yaml",
        "routers:\n  - type: tag\n    priority: 9223372036854775807\n  - type: tag\n    priority: high\n",
    );
    let out = routechain_in(&s.0, &["check", "prio.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        has_problem(
            &err,
            "prio.chain.yaml:3:15:",
            "routers[0].priority: `priority` is out of range: found 9223372036854775807, expected an integer from -2147483648 to 2147483647"
        ),
        "{err}"
    );
    assert!(
        has_problem(
            &err,
            "prio.chain.yaml:5:15:",
            "routers[1].priority: `priority` must be an integer: found \"high\", expected an integer from -2147483648 to 2147483647"
        ),
        "{err}"
    );
}

#[test]
fn an_out_of_range_weight_says_which_range() {
    let s = Scratch::new("weight");
    s.write(
        "weight.chain.yaml",
        "routers:\n  - type: condition\n    rule:\n      configVersion: v3.1\n      conditions:\n        - from: {match: env=gray}\n          to:\n            - {match: env=gray, weight: 99999999999}\n",
    );
    let out = routechain_in(&s.0, &["check", "weight.chain.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("weight 99999999999 is out of range: an integer from 0 to 4294967295"),
        "{err}"
    );
}

#[test]
fn request_json_errors_name_the_field_path_once_located() {
    let s = Scratch::new("request");
    s.write("chain.yaml", "routers: []\n");
    s.write("providers.txt", "dubbo://10.0.0.1:20880/s\n");
    s.write(
        "request.json",
        "{\"method\": \"x\", \"attachments\": {\"a\": [\"b\"]}}",
    );
    let out = routechain_in(
        &s.0,
        &[
            "route",
            "--chain",
            "chain.yaml",
            "--providers",
            "providers.txt",
            "--request",
            "request.json",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "request.json:1:37: attachments.a: invalid request: invalid type: sequence, expected a string\n"
        ),
        "{err}"
    );
    assert!(!err.contains("at line"), "{err}");
}

/// The tag-rule warning (`match` ignored before configVersion v3.0) is located at the
/// `match` key, in a chain file and in a rule file, printed once, and a pipe gets no colour
/// codes.
#[test]
fn piped_warnings_are_located_and_have_no_colour_codes() {
    let s = Scratch::new("colour");
    let rule = "configVersion: v2.7\ntags:\n  - name: gray\n    match: [{key: env, value: {exact: gray}}]\n";
    let inline: String = rule.lines().map(|l| format!("      {l}\n")).collect();
    s.write(
        "warn.chain.yaml",
        format!("routers:\n  - type: tag\n    rule:\n{inline}"),
    );
    s.write("gray.tag-router", rule);
    for (file, at, field) in [
        (
            "warn.chain.yaml",
            "warn.chain.yaml:7:11: ",
            "routers[0].rule.tags[0].match",
        ),
        ("gray.tag-router", "gray.tag-router:4:5: ", "tags[0].match"),
    ] {
        let out = routechain_in(&s.0, &["check", file]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            has_problem(
                &err,
                at,
                &format!("warning[RC107]: {field}: unknown field `match` for configVersion v2.7")
            ),
            "expected the located tag-rule warning at {at}: {err}"
        );
        // Every line mentioning the warning is the located one: no unlocated log line.
        for line in err.lines().filter(|l| l.contains("configVersion")) {
            assert!(line.starts_with(at), "an unlocated warning: {line}\n{err}");
        }
        assert!(!err.contains('\u{1b}'), "colour codes in a pipe: {err:?}");
    }
}
