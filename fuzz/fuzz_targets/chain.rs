//! Chain files and rule documents: bytes → UTF-8 (located) → YAML → chain file → every
//! router compiled (condition texts, tag rules, group and IDC-weight rules...). The
//! `routechain check` exit code is 2 exactly when there is a problem, 0 otherwise.
#![no_main]

use libfuzzer_sys::fuzz_target;
use routechain_fuzz::check_located;
use routechain_rules::ChainFile;

const ORIGIN: &str = "fuzz.chain.yaml";

fuzz_target!(|data: &[u8]| {
    let text = match routechain_rules::input::decode(ORIGIN, data.to_vec()) {
        Ok(text) => text,
        Err(e) => {
            let lossy = String::from_utf8_lossy(data);
            let valid = &data[..std::str::from_utf8(data).err().map_or(0, |e| e.valid_up_to())];
            check_located(ORIGIN, std::str::from_utf8(valid).unwrap(), &[e]);
            let _ = lossy;
            return;
        }
    };
    // Rule files are read relative to a directory that does not exist: the harness never
    // reads the machine's files, and plugin libraries are not in the registry.
    let base = Some(std::path::PathBuf::from("/nonexistent-routechain-fuzz"));
    let (chain, mut errors) = ChainFile::parse_lenient(ORIGIN, &text, base);
    if let Some(chain) = &chain
        && let Err(mut es) = chain.compile(&routechain_routers::builtin_registry())
    {
        errors.append(&mut es.0);
    }
    check_located(ORIGIN, routechain_rules::input::strip_bom(&text), &errors);
    // The same text as a standalone rule document: YAML located errors.
    if let Err(e) = routechain_rules::YamlDoc::parse(ORIGIN, &text) {
        check_located(ORIGIN, routechain_rules::input::strip_bom(&text), &[e]);
    }
});
