//! Mesh rule lints: the warnings the mesh router's reader gives for what Dubbo accepts and
//! ignores (`routechain::routers::mesh::check`), located in the rule's document.
//!
//! An unknown key is [`Code::UnknownField`] (RC107, with a "did you mean" when a known key
//! is close); anything else the reader warns about (a part that is not evaluated, a match
//! that never holds, a number where Dubbo reads a string) is [`Code::MeshIgnored`] (RC109).

use routechain::core::{FieldPath, RouterSpec, RuleDoc};
use routechain::routers::mesh;
use serde_json::Value;

use super::{Code, Problem, RuleRef, did_you_mean};

/// The warnings of a mesh rule; `entry` is its chain entry (for `tracing_prefix`), when it
/// has one.
pub fn lint(rule: RuleRef<'_>, entry: Option<&Value>) -> Vec<Problem> {
    let Some(doc) = rule.rule_doc() else {
        return Vec::new();
    };
    // A rule written in a file or inline (never a config-center text, which may clear).
    let mut static_entry = serde_json::json!({ "type": "mesh", "rule_file": "" });
    if let Some(prefix) = entry.and_then(|e| e.get("tracing_prefix")) {
        static_entry["tracing_prefix"] = prefix.clone();
    }
    let entry_path = FieldPath::root();
    let spec = RouterSpec {
        type_name: "mesh",
        entry: RuleDoc::new(&static_entry, &entry_path),
        rule: Some(doc),
        base_dir: None,
        service: None,
    };
    mesh::check(&spec)
        .warnings
        .iter()
        .map(|w| {
            let mut w = w.clone();
            let code = if w.message.starts_with("unknown field") {
                if !w.message.contains("did you mean")
                    && let Some(hint) = suggestion(&w.message)
                {
                    w.message.push_str(&format!("; did you mean `{hint}`?"));
                }
                Code::UnknownField
            } else {
                Code::MeshIgnored
            };
            Problem::new(code, rule.doc.locate_error(&w))
        })
        .collect()
}

/// The known key closest to the unknown one, read from the reader's message
/// (``unknown field `k` of …; known fields: `a`, `b` ``).
fn suggestion(message: &str) -> Option<String> {
    let key = message.split('`').nth(1)?;
    let known = message.split("known fields: ").nth(1)?;
    let known = known.split(';').next()?;
    did_you_mean(key, known.split(", ").map(|k| k.trim().trim_matches('`'))).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_come_from_the_known_keys() {
        let m = "unknown field `subsett` of a destination, ignored (as Dubbo does); known fields: `host`, `subset`, `port`, `fallback`";
        assert_eq!(suggestion(m).as_deref(), Some("subset"));
        let m = "unknown field `zzz` of x, ignored (as Dubbo does); known fields: `host`";
        assert_eq!(suggestion(m), None);
    }
}
