//! `routechain nacos`: read and write rules and providers in Nacos, in Dubbo's layout
//! (rules: configs of group `dubbo`; providers: instances of
//! `providers:<interface>:<version>:<group>`), the `zk` group's commands for Nacos.

use std::path::PathBuf;
use std::process::ExitCode;

use super::zk::{RuleAction, check_urls, rule_command, rule_text, wait_for_stop};
use super::{EXIT_INVALID, EXIT_UNAVAILABLE};
use routechain::live::{NacosAddress, NacosAdmin, NacosError, RULE_GROUP, RuleKey, rule_data_id};

/// Arguments of `nacos`.
#[derive(Debug, clap::Args)]
pub struct NacosArgs {
    #[command(subcommand)]
    command: NacosCommand,
}

/// Where and which rule.
#[derive(Debug, clap::Args)]
pub struct RuleConfig {
    /// Nacos: `nacos://host:port[,host:port]?namespace=NS&group=G` with credentials
    /// `nacos://user:pass@host:port` or `username=`/`password=` (a user without a password
    /// reads it from ROUTECHAIN_NACOS_PASSWORD or the file named by
    /// ROUTECHAIN_NACOS_PASSWORD_FILE). Shown masked. Rules are in the namespace's group
    /// `dubbo`, as Dubbo reads them.
    #[arg(long)]
    registry: String,
    /// The rule key: a service key `interface:version:group` (both colons, e.g.
    /// `com.foo.BarService::`) or an application name.
    #[arg(long)]
    key: String,
    /// The rule kind: a router type (`condition`, `tag`, `affinity`, or a routechain type:
    /// dataId `<key>.<type>-router`), `mesh` (`<key>.MESHAPPRULE`) or `configurators`
    /// (override rules: `<key>.configurators`).
    #[arg(long = "type", value_parser = super::check::RuleTypeParser)]
    router_type: String,
}

/// Where and which service.
#[derive(Debug, clap::Args)]
pub struct ProviderInstances {
    /// Nacos, as for the rule commands; providers are in the address's `group` (default
    /// `DEFAULT_GROUP`), as Dubbo registers them.
    #[arg(long)]
    registry: String,
    /// The service interface (`com.foo.BarService`).
    #[arg(long)]
    service: String,
}

#[derive(Debug, clap::Subcommand)]
enum NacosCommand {
    /// Write a rule config `<key>.<type>-router` (`.MESHAPPRULE` for `--type mesh`,
    /// `.configurators` for `--type configurators`) of group `dubbo` from a file (`-`:
    /// stdin).
    #[command(
        after_help = "Examples:\n  routechain nacos put-rule --registry nacos://127.0.0.1:8848 --key com.foo.BarService:: \\\n    --type condition condition.rule.yaml\n  routechain nacos put-rule --dry-run --registry 'nacos://127.0.0.1:8848?namespace=dev' \\\n    --key com.foo.BarService:: --type condition condition.rule.yaml   # validate and diff only\n\nExit: 0 written (or, with --dry-run, valid), 2 invalid rule, unknown type or bad\n--registry address (nothing written), 4 Nacos unreachable."
    )]
    PutRule {
        #[command(flatten)]
        config: RuleConfig,
        /// Validate, and print the diff against the config's current text; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// The rule YAML: validated as `routechain check --type TYPE` does (an invalid rule
        /// is not written), then written as is. `-`: standard input.
        file: PathBuf,
    },
    /// Print a rule config's text.
    #[command(
        after_help = "Example:\n  routechain nacos get-rule --registry nacos://127.0.0.1:8848 --key demo-provider --type tag\n\nExit: 0 printed, 1 no such config."
    )]
    GetRule {
        #[command(flatten)]
        config: RuleConfig,
    },
    /// Remove a rule config (a routechain watching it clears the rule).
    #[command(
        after_help = "Example:\n  routechain nacos delete-rule --registry nacos://127.0.0.1:8848 --key com.foo.BarService:: --type condition"
    )]
    DeleteRule {
        #[command(flatten)]
        config: RuleConfig,
    },
    /// Register providers as Dubbo's NacosRegistry does: ephemeral instances of
    /// `providers:<interface>:<version>:<group>`, held while the command runs (registered
    /// again after a reconnection), removed on Ctrl-C (or SIGTERM).
    #[command(
        after_help = "Example:\n  routechain nacos register --registry nacos://127.0.0.1:8848 --service com.foo.BarService \\\n    'dubbo://10.0.0.1:20880/com.foo.BarService?region=hangzhou'"
    )]
    Register {
        #[command(flatten)]
        instances: ProviderInstances,
        /// Provider URLs.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// Remove registered providers.
    #[command(
        after_help = "Example:\n  routechain nacos unregister --registry nacos://127.0.0.1:8848 --service com.foo.BarService \\\n    'dubbo://10.0.0.1:20880/com.foo.BarService?region=hangzhou'"
    )]
    Unregister {
        #[command(flatten)]
        instances: ProviderInstances,
        /// Provider URLs, as registered.
        #[arg(required = true)]
        urls: Vec<String>,
    },
    /// List a service's registered providers (every version and group), one URL per line,
    /// as a consumer builds them from the instances.
    #[command(
        after_help = "Example:\n  routechain nacos providers --registry nacos://127.0.0.1:8848 --service com.foo.BarService"
    )]
    Providers {
        #[command(flatten)]
        instances: ProviderInstances,
    },
}

/// Runs a `nacos` subcommand (the client needs a multi-threaded runtime).
pub fn run(args: &NacosArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            errln!("routechain nacos: cannot start a runtime: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    let code = runtime.block_on(nacos(&args.command));
    // The client's own tasks would keep the process waiting.
    runtime.shutdown_background();
    code
}

fn key(config: &RuleConfig) -> RuleKey {
    RuleKey::new(config.key.clone(), config.router_type.clone())
}

fn fail(e: NacosError) -> ExitCode {
    errln!("routechain nacos: {e}");
    ExitCode::from(EXIT_UNAVAILABLE)
}

/// A rule command on the config of `config`.
async fn rule(admin: &NacosAdmin, config: &RuleConfig, action: RuleAction<'_>) -> ExitCode {
    let k = key(config);
    rule_command(admin, &k, &config_name(&k), "config", action)
        .await
        .unwrap_or_else(fail)
}

fn config_name(key: &RuleKey) -> String {
    format!("{RULE_GROUP}/{}", rule_data_id(key))
}

async fn nacos(command: &NacosCommand) -> ExitCode {
    let registry = match command {
        NacosCommand::PutRule { config, .. }
        | NacosCommand::GetRule { config }
        | NacosCommand::DeleteRule { config } => &config.registry,
        NacosCommand::Register { instances, .. }
        | NacosCommand::Unregister { instances, .. }
        | NacosCommand::Providers { instances } => &instances.registry,
    };
    let text = match command {
        NacosCommand::PutRule { config, file, .. } => {
            rule_text(&config.key, &config.router_type, Some(file))
        }
        NacosCommand::GetRule { config } | NacosCommand::DeleteRule { config } => {
            rule_text(&config.key, &config.router_type, None)
        }
        _ => Ok(None),
    };
    let text = match text {
        Ok(t) => t,
        Err(code) => return code,
    };
    if let NacosCommand::Register { urls, .. } | NacosCommand::Unregister { urls, .. } = command
        && let Err(code) = check_urls(urls)
    {
        return code;
    }
    let address = match NacosAddress::parse(registry) {
        Ok(a) => a,
        Err(e) => {
            errln!("routechain nacos: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let admin = match NacosAdmin::connect_to(&address).await {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let result = match command {
        NacosCommand::PutRule {
            config, dry_run, ..
        } => {
            let text = text.as_deref().unwrap_or_default();
            let action = RuleAction::Put {
                text,
                dry_run: *dry_run,
            };
            return rule(&admin, config, action).await;
        }
        NacosCommand::GetRule { config } => return rule(&admin, config, RuleAction::Get).await,
        NacosCommand::DeleteRule { config } => {
            return rule(&admin, config, RuleAction::Delete).await;
        }
        NacosCommand::Register { instances, urls } => {
            for url in urls {
                if let Err(e) = admin.register(&instances.service, url).await {
                    return fail(e);
                }
            }
            errln!(
                "registered {} provider(s) (ephemeral) in {}; holding them until Ctrl-C",
                urls.len(),
                admin.address()
            );
            wait_for_stop().await;
            let mut result = Ok(());
            for url in urls {
                if let Err(e) = admin.unregister(&instances.service, url).await {
                    result = Err(e);
                }
            }
            result.map(|()| errln!("unregistered {} provider(s)", urls.len()))
        }
        NacosCommand::Unregister { instances, urls } => {
            let mut result = Ok(());
            for url in urls {
                if let Err(e) = admin.unregister(&instances.service, url).await {
                    result = Err(e);
                    break;
                }
            }
            result.map(|()| errln!("unregistered {} provider(s)", urls.len()))
        }
        NacosCommand::Providers { instances } => {
            admin.providers(&instances.service).await.map(|urls| {
                for u in urls {
                    outln!("{u}");
                }
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
