//! `condense mcp`: the stdio MCP server that lists `context_tree_query`
//! for agents whose history condense's proxy rewrites (Claude Code sees it
//! as `mcp__condense__context_tree_query`).
//!
//! It holds no session: it cannot tell which conversation a call comes
//! from. It answers with a placeholder that the proxy, which sees the
//! conversation, replaces with the session's answer before the model reads
//! it (condense_host_proxy::query_tool).

use std::sync::Arc;

use condense_host_proxy::query_tool::{self, TOOL_NAME};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::CliError;

/// The MCP server (one tool).
#[derive(Debug, Clone, Copy)]
struct QueryServer;

fn tool() -> Tool {
    let schema = match query_tool::input_schema() {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    Tool::new(TOOL_NAME, query_tool::DESCRIPTION, Arc::new(schema))
}

impl ServerHandler for QueryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("condense", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(query_tool::pending_text())]).into())
    }
}

/// Serves MCP on stdin and stdout until the client closes them.
pub fn run() -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Data(format!("mcp: starting the runtime: {e}")))?;
    runtime.block_on(async {
        let service = QueryServer
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::Data(format!("mcp: {e}")))?;
        service
            .waiting()
            .await
            .map_err(|e| CliError::Data(format!("mcp: {e}")))?;
        Ok(())
    })
}
