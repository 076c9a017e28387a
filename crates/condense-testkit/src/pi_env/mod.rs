//! Node + pi for end-to-end tests, and headless pi runs against a fake LLM.
//!
//! # Installation
//!
//! A [`PiTarget`] names one combination of pi package, pi version and Node
//! version. [`require_pi`] (or [`PiInstall::get`]) uses the default target,
//! [`PiTarget::default_target`]: [`PI_PACKAGE`]@[`PI_VERSION`] on Node
//! [`NODE_VERSION`]. [`require_pi_target`] (or [`PiInstall::get_target`])
//! takes any other, e.g. [`PiTarget::pi_1_6`] or [`PiTarget::pi_0_73`].
//!
//! A target is installed with the system `npm`: the npm package `node` (which
//! carries a Node binary) at the target's Node version, and the pi package,
//! into `<cache>/<PiTarget::dir_name>/` (`pi-<version>-node-<node>` for
//! [`PI_PACKAGE`], the scope added for other package names). The cache
//! directory is `$CONDENSE_E2E_CACHE`, or `<workspace>/.cache/pi-e2e`
//! (git-ignored). An install goes to a staging directory first and is renamed
//! into place only after `node --version` and `pi --version` answer as
//! expected, so a broken or concurrent install never leaves a half-filled
//! cache behind. Each target is installed at most once per test process.
//!
//! If Node or pi cannot be had, [`require_pi`] and [`require_pi_target`]
//! **panic** with the reason: an end-to-end test never passes or skips
//! silently. The one exception is a developer convenience: with
//! `CONDENSE_SKIP_E2E=1` in the environment, they return `None` without
//! trying, and the test returns early saying so. CI never sets it.
//!
//! # Running pi
//!
//! [`PiEnv`] is one isolated pi "machine": a temporary directory holding the
//! agent directory (`PI_CODING_AGENT_DIR`, with `models.json` for provider
//! `fake` and `settings.json`), a working directory (pi's cwd) and a `HOME`.
//! [`PiEnv::prompt`] runs
//! `pi --offline --no-extensions -e <ext>… --provider fake --model fake-1 --mode json -p <prompt>`
//! with a timeout; [`PiEnv::prompt_in_session`] adds `--session <file>`.
//! [`PiRun`] holds the exit status, stdout (json-mode events) and stderr.
//!
//! One concern a file: this one holds the targets (which pi on which
//! Node); `install.rs` finding or installing a target in the cache,
//! `files.rs` the files pi reads and writes (models, extensions, session
//! JSONL), `run.rs` the isolated environment and a headless run's result.

use std::time::Duration;

mod files;
mod install;
mod run;

pub use files::{
    merge_json, models_json, pi_message_text, read_jsonl, session_messages, write_extension,
};
pub use install::{pi_version, require_pi, require_pi_target, PiInstall};
pub use run::{PiEnv, PiRun};

/// The `node` npm package version (it carries the Node binary). pi ≥ 0.75
/// requires Node ≥ 22.19.
pub const NODE_VERSION: &str = "22.23.3";

/// The pi package on the npm registry.
pub const PI_PACKAGE: &str = "@earendil-works/pi-coding-agent";

/// The pinned pi version: the line pi-condense 2.9.1 targets (`^0.83`) and the
/// version that wrote `fixtures/pi-condense-2.9.1`.
pub const PI_VERSION: &str = "0.83.0";

/// pi's package name up to 0.73 (0.74 moved to [`PI_PACKAGE`]).
pub const PI_PACKAGE_LEGACY: &str = "@mariozechner/pi-coding-agent";

/// The last pi under [`PI_PACKAGE_LEGACY`]; it declares Node ≥ 20.6.
pub const PI_VERSION_LEGACY: &str = "0.73.1";

/// A Node 20 the npm registry's `node` package has (`npm view node@20 version`).
pub const NODE_20_VERSION: &str = "20.20.2";

/// The current pi 1.x line tested besides the pinned version.
pub const PI_VERSION_1_6: &str = "1.6.0";

/// Overrides [`PI_VERSION`] (developer convenience, to try another pi).
pub const PI_VERSION_ENV: &str = "CONDENSE_E2E_PI_VERSION";

/// Overrides [`PI_PACKAGE`] for the default target (developer convenience,
/// e.g. `@mariozechner/pi-coding-agent` with `CONDENSE_E2E_PI_VERSION=0.73.1`).
pub const PI_PACKAGE_ENV: &str = "CONDENSE_E2E_PI_PACKAGE";

/// Overrides [`NODE_VERSION`] for the default target (developer convenience).
pub const NODE_VERSION_ENV: &str = "CONDENSE_E2E_NODE_VERSION";

/// The provider name written to `models.json`.
pub const PROVIDER: &str = "fake";

/// The model id written to `models.json`.
pub const MODEL: &str = "fake-1";

/// Default upper bound for one pi run.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// One (pi package, pi version, Node version) combination to install and run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PiTarget {
    /// The pi package on the npm registry, e.g. [`PI_PACKAGE`].
    pub package: String,
    /// The pi version, e.g. [`PI_VERSION`].
    pub version: String,
    /// The version of the npm package `node` (the Node binary), e.g. [`NODE_VERSION`].
    pub node: String,
}

impl PiTarget {
    /// Any combination.
    pub fn new(package: &str, version: &str, node: &str) -> Self {
        Self {
            package: package.to_owned(),
            version: version.to_owned(),
            node: node.to_owned(),
        }
    }

    /// The default: [`PI_PACKAGE`] at [`pi_version`] (the pinned
    /// [`PI_VERSION`]) on Node [`NODE_VERSION`]. `$CONDENSE_E2E_PI_PACKAGE`,
    /// `$CONDENSE_E2E_PI_VERSION` and `$CONDENSE_E2E_NODE_VERSION` override
    /// each part, to run every end-to-end test on another pi.
    pub fn default_target() -> Self {
        Self::new(
            &env_or(PI_PACKAGE_ENV, PI_PACKAGE),
            &pi_version(),
            &env_or(NODE_VERSION_ENV, NODE_VERSION),
        )
    }

    /// [`PI_PACKAGE`]@[`PI_VERSION_1_6`] on Node [`NODE_VERSION`].
    pub fn pi_1_6() -> Self {
        Self::new(PI_PACKAGE, PI_VERSION_1_6, NODE_VERSION)
    }

    /// [`PI_PACKAGE_LEGACY`]@[`PI_VERSION_LEGACY`] on Node [`NODE_20_VERSION`].
    pub fn pi_0_73() -> Self {
        Self::new(PI_PACKAGE_LEGACY, PI_VERSION_LEGACY, NODE_20_VERSION)
    }

    /// The install directory's name inside the cache: `pi-<version>-node-<node>`
    /// for [`PI_PACKAGE`] (the name the default install always had), with the
    /// package's scope in front for any other package
    /// (`pi-mariozechner-0.73.1-node-20.20.2`).
    pub fn dir_name(&self) -> String {
        if self.package == PI_PACKAGE {
            return format!("pi-{}-node-{}", self.version, self.node);
        }
        let scope: String = self
            .package
            .split('/')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        format!("pi-{scope}-{}-node-{}", self.version, self.node)
    }
}

impl std::fmt::Display for PiTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{} on Node {}", self.package, self.version, self.node)
    }
}

/// `$key` trimmed, or `default` when it is unset or blank.
pub(super) fn env_or(key: &str, default: &str) -> String {
    std::env::var(key)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}
