//! Flags of every subcommand that loads policies (`check`, `audit`, `serve`).

use clap::Args;

use crate::policy::{Action, LoadOptions};

/// How the command line adjusts the policy directory it loads.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct PolicyFlags {
    /// Action (deny, warn or audit) of every policy whose params.yaml entry sets no
    /// `action`. Audit-first: `audit` makes every policy report and none refuse, until a
    /// policy is promoted by giving it `action: deny` in params.yaml (which always wins over
    /// this flag). Unset: params.yaml's `defaultAction`, else each policy's own default.
    #[arg(long, env = "GANGPLANK_DEFAULT_ACTION", value_parser = parse_action)]
    pub default_action: Option<Action>,
}

impl PolicyFlags {
    pub fn options(self) -> LoadOptions {
        let Self { default_action } = self;
        LoadOptions { default_action }
    }
}

fn parse_action(text: &str) -> Result<Action, String> {
    Action::parse(text).ok_or_else(|| format!("{text:?} is not deny, warn or audit"))
}
