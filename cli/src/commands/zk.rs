//! `routechain zk`: read and write rules and providers in ZooKeeper, in Dubbo's layout.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{EXIT_INVALID, EXIT_UNAVAILABLE};
use routechain::live::{
    RegistryAddress, RuleKey, RuleWriter, ZkAddress, ZkAdmin, ZkError, ZkRegistration, rule_path,
};

/// Waits for Ctrl-C (SIGINT) or SIGTERM.
pub(super) async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Arguments of `zk`.
#[derive(Debug, clap::Args)]
pub struct ZkArgs {
    #[command(subcommand)]
    command: ZkCommand,
}

/// Where and which rule.
#[derive(Debug, clap::Args)]
pub struct RuleNode {
    /// The registry: `host:port[,host:port...][/chroot]` or
    /// `zookeeper://host:port?backup=...`, with digest credentials `user:pass@` (Dubbo's
    /// forms; `user@host:port` reads the password from ROUTECHAIN_ZK_PASSWORD or the file
    /// named by ROUTECHAIN_ZK_PASSWORD_FILE). Shown masked: `user:***@host:port`. Of
    /// several registries (`a|b`), rules go to the config center (the first, or the one
    /// with `use-as-config-center=true`).
    #[arg(long = "registry", visible_alias = "zookeeper", value_name = "ADDRESS")]
    registry: String,
    /// The rule key: a service key `interface:version:group` (both colons, e.g.
    /// `com.foo.BarService::`) or an application name.
    #[arg(long)]
    key: String,
    /// The node kind: a router type (`condition`, `tag`, `affinity`, or a routechain type:
    /// node `<key>.<type>-router`), `mesh` (node `<key>.MESHAPPRULE`) or `configurators`
    /// (override rules: node `<key>.configurators`).
    #[arg(long = "type", value_parser = super::check::RuleTypeParser)]
    router_type: String,
}

/// Where and which service.
#[derive(Debug, clap::Args)]
pub struct ProviderNodes {
    /// The registry: `host:port[,host:port...][/chroot]` or
    /// `zookeeper://host:port?backup=...`, with digest credentials `user:pass@` (Dubbo's
    /// forms; `user@host:port` reads the password from ROUTECHAIN_ZK_PASSWORD or the file
    /// named by ROUTECHAIN_ZK_PASSWORD_FILE). Shown masked: `user:***@host:port`. Of
    /// several registries (`a|b`), rules go to the config center (the first, or the one
    /// with `use-as-config-center=true`).
    #[arg(long = "registry", visible_alias = "zookeeper", value_name = "ADDRESS")]
    registry: String,
    /// The service interface (`com.foo.BarService`).
    #[arg(long)]
    service: String,
}

#[derive(Debug, clap::Subcommand)]
enum ZkCommand {
    /// Write a rule node `/dubbo/config/dubbo/<key>.<type>-router` (`.MESHAPPRULE` for
    /// `--type mesh`, `.configurators` for `--type configurators`) from a file (`-`: stdin).
    #[command(
        after_help = "Examples:\n  routechain zk put-rule --zookeeper 127.0.0.1:2181 --key com.foo.BarService:: \\\n    --type condition condition.rule.yaml\n  routechain zk put-rule --dry-run --zookeeper 127.0.0.1:2181 --key com.foo.BarService:: \\\n    --type condition condition.rule.yaml     # validate and print the diff only\n  routechain zk put-rule --zookeeper 127.0.0.1:2181 --key com.foo.BarService:: \\\n    --type configurators weights.configurators.yaml   # Dubbo override rules\n  ROUTECHAIN_ZK_PASSWORD_FILE=/etc/routechain/zk.pass routechain zk put-rule \\\n    --zookeeper 'zookeeper://admin@127.0.0.1:2181' --key com.foo.BarService:: \\\n    --type condition condition.rule.yaml     # digest auth: creator-only nodes\n\nCredentials: `admin:PASSWORD@host:port` works too, but then the password is in the shell\nhistory; messages show it as `admin:***@host:port`.\n\nExit: 0 written (or, with --dry-run, valid), 2 invalid rule, unknown type or bad\n--zookeeper address (nothing written), 4 ZooKeeper unreachable."
    )]
    PutRule {
        #[command(flatten)]
        node: RuleNode,
        /// Validate, and print the diff against the node's current text; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// With credentials, let everyone read the nodes written (the creator alone
        /// writes them); by default they are the creator's only, as Dubbo writes them.
        #[arg(long)]
        world_readable: bool,
        /// The rule YAML: validated as `routechain check --type TYPE` does (an invalid rule
        /// is not written), then written as is. `-`: standard input.
        file: PathBuf,
    },
    /// Print a rule node's text.
    #[command(
        after_help = "Example:\n  routechain zk get-rule --zookeeper 127.0.0.1:2181 --key demo-provider --type tag\n\nExit: 0 printed, 1 no such node."
    )]
    GetRule {
        #[command(flatten)]
        node: RuleNode,
    },
    /// Delete a rule node (a routechain watching it clears the rule).
    #[command(
        after_help = "Example:\n  routechain zk delete-rule --zookeeper 127.0.0.1:2181 --key com.foo.BarService:: --type condition"
    )]
    DeleteRule {
        #[command(flatten)]
        node: RuleNode,
    },
    /// Register providers: `/dubbo/<interface>/providers/<URL-encoded URL>`, ephemeral
    /// like Dubbo's: held while the command runs, removed on Ctrl-C (or SIGTERM).
    #[command(
        after_help = "Example:\n  routechain zk register --zookeeper 127.0.0.1:2181 --service com.foo.BarService \\\n    'dubbo://10.0.0.1:20880/com.foo.BarService?region=hangzhou'\n\nWith --persistent the nodes stay after the command exits (remove them with `zk unregister`).\nEphemeral nodes are registered again on every new session (after a session expiry), and said so."
    )]
    Register {
        #[command(flatten)]
        nodes: ProviderNodes,
        /// Write persistent nodes and exit (they stay until `zk unregister`).
        #[arg(long)]
        persistent: bool,
        /// With credentials, let everyone read the nodes written (the creator alone
        /// writes them); by default they are the creator's only, as Dubbo writes them.
        #[arg(long)]
        world_readable: bool,
        /// Provider URLs.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Remove registered providers.
    #[command(
        after_help = "Example:\n  routechain zk unregister --zookeeper 127.0.0.1:2181 --service com.foo.BarService \\\n    'dubbo://10.0.0.1:20880/com.foo.BarService?region=hangzhou'"
    )]
    Unregister {
        #[command(flatten)]
        nodes: ProviderNodes,
        /// Provider URLs, as registered.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// List a service's registered providers (decoded), one per line.
    #[command(
        after_help = "Example:\n  routechain zk providers --zookeeper 127.0.0.1:2181 --service com.foo.BarService"
    )]
    Providers {
        #[command(flatten)]
        nodes: ProviderNodes,
    },
}

/// Runs a `zk` subcommand on a single-threaded runtime.
pub fn run(args: &ZkArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            errln!("routechain zk: cannot start a runtime: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    runtime.block_on(zk(&args.command))
}

fn key(node: &RuleNode) -> RuleKey {
    RuleKey::new(node.key.clone(), node.router_type.clone())
}

/// Validates a rule as `routechain check --type TYPE` does: problems on stderr; an error (or
/// an unknown type) exits 2. Warns when a service key lacks Dubbo's colons.
pub(super) fn validate_rule(
    key: &str,
    router_type: &str,
    file: &std::path::Path,
    text: &str,
) -> Result<(), ExitCode> {
    let origin = routechain::rules::input::origin_of(file);
    let registry = routechain::registry();
    let report = super::check::check_rule(&origin, text, Some(router_type), None, &registry);
    for p in &report.problems {
        errln!("{}", p.render());
    }
    if key.contains('.') && !key.contains(':') {
        let watched = RuleKey::new(format!("{}::", key), router_type);
        errln!(
            "warning: the key {:?} has no `:`; consumers of the service {} watch \
             the service key `interface:version:group`, here {} (an application rule's key is \
             the application name)",
            key,
            key,
            rule_path(&watched)
        );
    }
    let (errors, _) = super::check::count(&report.problems);
    if errors > 0 {
        errln!(
            "the rule has {}: nothing written",
            super::check::plural(errors, "error")
        );
        return Err(ExitCode::from(EXIT_INVALID));
    }
    Ok(())
}

/// Refuses a `--type` that names no rule node kind (exit 2), with the known ones.
pub(super) fn known_type(ty: &str) -> Result<(), ExitCode> {
    let registry = routechain::registry();
    let known = super::check::rule_types(&registry);
    if known.contains(&ty) {
        return Ok(());
    }
    errln!(
        "{}",
        crate::out::paint_errors(&format!(
            "routechain zk: {}",
            routechain::core::unknown_name("rule type", ty, known.iter().copied())
        ))
    );
    Err(ExitCode::from(EXIT_INVALID))
}

/// The rule text of a rule command, checked before anything is connected: an unknown
/// `--type` is refused; for `put-rule` (`file` given) the input is read and validated, so a
/// bad path fails fast and an invalid rule is never written. `None` for the other commands.
pub(super) fn rule_text(
    key: &str,
    router_type: &str,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, ExitCode> {
    known_type(router_type)?;
    let Some(file) = file else {
        return Ok(None);
    };
    let text = match routechain::rules::input::read_input(file) {
        Ok(t) => t,
        Err(e) => {
            errln!("{}", crate::out::paint_errors(&e.render()));
            return Err(ExitCode::from(EXIT_INVALID));
        }
    };
    validate_rule(key, router_type, file, &text)?;
    Ok(Some(text))
}

/// What a rule command does, the same over ZooKeeper and Nacos.
pub(super) enum RuleAction<'a> {
    /// `put-rule`: write `text`; `dry_run`: print the diff against the current text instead.
    Put {
        /// The validated rule.
        text: &'a str,
        /// Write nothing.
        dry_run: bool,
    },
    /// `get-rule`: print the text.
    Get,
    /// `delete-rule`.
    Delete,
}

/// Runs a rule command on `store` for `key`, shown as `name` (a node path, a config name),
/// a rule `noun` ("node", "config"). Exit: 0 done; 1 `get-rule` of no rule.
pub(super) async fn rule_command<S: RuleWriter + Sync>(
    store: &S,
    key: &RuleKey,
    name: &str,
    noun: &str,
    action: RuleAction<'_>,
) -> Result<ExitCode, S::Error> {
    match action {
        RuleAction::Put {
            text,
            dry_run: true,
        } => {
            let current = store.rule(key).await?;
            out!("{}", diff(name, current.as_deref(), text));
            errln!("dry run: nothing written to {name}");
        }
        RuleAction::Put { text, .. } => {
            store.put_rule(key, text).await?;
            errln!("wrote {name}");
        }
        RuleAction::Get => match store.rule(key).await? {
            Some(text) => {
                out!("{text}");
                if !text.ends_with('\n') {
                    outln!();
                }
            }
            None => {
                errln!("no rule {noun} {name}");
                return Ok(ExitCode::FAILURE);
            }
        },
        RuleAction::Delete => {
            if store.delete_rule(key).await? {
                errln!("deleted {name}");
            } else {
                errln!("no rule {noun} {name} (nothing to delete)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A unified diff from the node's current text (none: the node does not exist) to `new`.
pub(super) fn diff(node: &str, current: Option<&str>, new: &str) -> String {
    let old = current.unwrap_or("");
    if current == Some(new) {
        return format!("{node}: unchanged\n");
    }
    let from = if current.is_some() {
        format!("{node} (current)")
    } else {
        format!("{node} (no such node)")
    };
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(&from, &format!("{node} (new)"))
        .to_string()
}

/// Refuses a provider URL that does not parse (exit 2), before anything is written.
pub(super) fn check_urls(urls: &[String]) -> Result<(), ExitCode> {
    for url in urls {
        if let Err(e) = routechain::core::Url::parse_provider(url) {
            errln!(
                "routechain zk: invalid provider URL {url:?} at column {}: {}",
                e.column,
                e.reason
            );
            return Err(ExitCode::from(EXIT_INVALID));
        }
    }
    Ok(())
}

/// Registers ephemeral providers and holds them until Ctrl-C (or SIGTERM), registering
/// them again on every new session.
async fn register(
    address: &ZkAddress,
    world_readable: bool,
    service: &str,
    urls: &[String],
) -> ExitCode {
    if let Err(code) = check_urls(urls) {
        return code;
    }
    let providers = urls
        .iter()
        .map(|u| (service.to_string(), u.clone()))
        .collect();
    let on_event = |message: String| errln!("routechain zk: {message}");
    let registration =
        match ZkRegistration::start(address, world_readable, providers, on_event).await {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
    errln!(
        "registered {} provider(s) (ephemeral); holding them until Ctrl-C",
        urls.len()
    );
    wait_for_stop().await;
    registration.close().await;
    errln!("unregistered {} provider(s)", urls.len());
    ExitCode::SUCCESS
}

/// The ZooKeeper registry a command reads or writes: of several registries, the config
/// center for rules; providers are registered and listed in one registry named alone.
fn zk_address(text: &str, rules: bool) -> Result<ZkAddress, String> {
    let address = RegistryAddress::parse(text).map_err(|e| e.to_string())?;
    let entries = address.entries();
    let entry = if rules {
        &entries[address.config_center()]
    } else if let [one] = entries {
        one
    } else {
        return Err(format!(
            "{address} names {} registries: providers are registered and listed in one",
            entries.len()
        ));
    };
    entry.zookeeper().cloned().ok_or_else(|| {
        format!(
            "{entry} is not a ZooKeeper registry: write its rules and providers with `routechain {} ...`",
            entry.kind()
        )
    })
}

/// A rule command on the node of `node`.
async fn rule(admin: &ZkAdmin, node: &RuleNode, action: RuleAction<'_>) -> ExitCode {
    let k = key(node);
    rule_command(admin, &k, &rule_path(&k), "node", action)
        .await
        .unwrap_or_else(fail)
}

fn fail(e: ZkError) -> ExitCode {
    errln!("routechain zk: {e}");
    ExitCode::from(EXIT_UNAVAILABLE)
}

async fn zk(command: &ZkCommand) -> ExitCode {
    let (servers, rules) = match command {
        ZkCommand::PutRule { node, .. }
        | ZkCommand::GetRule { node }
        | ZkCommand::DeleteRule { node } => (&node.registry, true),
        ZkCommand::Register { nodes, .. }
        | ZkCommand::Unregister { nodes, .. }
        | ZkCommand::Providers { nodes } => (&nodes.registry, false),
    };
    // A rule command's type, input and rule are checked before anything is connected.
    let text = match command {
        ZkCommand::PutRule { node, file, .. } => {
            rule_text(&node.key, &node.router_type, Some(file))
        }
        ZkCommand::GetRule { node } | ZkCommand::DeleteRule { node } => {
            rule_text(&node.key, &node.router_type, None)
        }
        _ => Ok(None),
    };
    let text = match text {
        Ok(t) => t,
        Err(code) => return code,
    };
    // A bad address is refused before anything is connected.
    let address = match zk_address(servers, rules) {
        Ok(a) => a,
        Err(message) => {
            errln!("routechain zk: {message}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let world_readable = matches!(
        command,
        ZkCommand::PutRule {
            world_readable: true,
            ..
        } | ZkCommand::Register {
            world_readable: true,
            ..
        }
    );
    // Ephemeral registrations are held by a registration of their own (kept over sessions).
    if let ZkCommand::Register {
        nodes,
        persistent: false,
        urls,
        ..
    } = command
    {
        return register(&address, world_readable, &nodes.service, urls).await;
    }
    let admin = match ZkAdmin::connect_to(&address).await {
        Ok(a) => a.world_readable(world_readable),
        Err(e) => return fail(e),
    };
    let result = match command {
        ZkCommand::PutRule { node, dry_run, .. } => {
            let text = text.as_deref().unwrap_or_default();
            let action = RuleAction::Put {
                text,
                dry_run: *dry_run,
            };
            return rule(&admin, node, action).await;
        }
        ZkCommand::GetRule { node } => return rule(&admin, node, RuleAction::Get).await,
        ZkCommand::DeleteRule { node } => return rule(&admin, node, RuleAction::Delete).await,
        ZkCommand::Register { nodes, urls, .. } => {
            if let Err(code) = check_urls(urls) {
                return code;
            }
            for url in urls {
                if let Err(e) = admin.register_persistent(&nodes.service, url).await {
                    return fail(e);
                }
            }
            errln!("registered {} provider(s) (persistent)", urls.len());
            Ok(())
        }
        ZkCommand::Unregister { nodes, urls } => {
            let mut removed = 0;
            let mut result = Ok(());
            for url in urls {
                match admin.unregister(&nodes.service, url).await {
                    Ok(found) => removed += usize::from(found),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            result.map(|()| errln!("unregistered {removed} provider(s)"))
        }
        ZkCommand::Providers { nodes } => admin.providers(&nodes.service).await.map(|urls| {
            for u in urls {
                outln!("{u}");
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
