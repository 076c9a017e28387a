//! Protection: tool names and `args.path` globs whose outputs are never pruned.
//!
//! TODO(config helper): globset-backed matcher per the protected-paths spec.

use serde_json::Value;

/// A compiled protection predicate. Build once per config.
#[derive(Debug, Clone, Default)]
pub struct Protection {
    tools: Vec<String>,
}

impl Protection {
    /// Compiles the protection rules of a config.
    pub fn new(config: &crate::config::Config) -> Self {
        Protection { tools: config.protected_tools.clone() }
    }

    /// True iff the call's tool name is protected or its `args.path` matches a glob.
    pub fn is_protected(&self, tool_name: &str, _args: &Value) -> bool {
        self.tools.iter().any(|t| t == tool_name)
    }
}
