//! MCP over stdio, every line counted before the SDK parses it.
//!
//! rmcp's stdio transport takes lines of up to 16 MiB and parses each into
//! its untagged message enum (the whole tree buffered twice, every number a
//! heap string: ~2 GiB for one 15 MiB line), and drops a line it cannot
//! parse in silence, so a request nested past serde_json's 128 levels was
//! never answered. Here a reader task owns the input: it reads one line at a
//! time within [`MAX_LINE_BYTES`], counts its values and depth as `/mcp`
//! counts a body ([`super::gate::MAX_MESSAGE_VALUES`],
//! [`super::gate::MAX_MESSAGE_DEPTH`]), and only then hands it to the SDK's
//! transport through a pipe. A line refused is answered with a JSON-RPC
//! `Invalid Request` error (with the request's `id` when its top level has
//! one), never silence.

use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream,
};
use tokio::sync::mpsc;

use rmcp::RoleServer;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;

use super::gate::{MAX_MESSAGE_DEPTH, MAX_MESSAGE_VALUES, refusal_message, request_id};
use crate::edge::http::{MAX_BODY_BYTES, check_shape};

/// Longest line (one message) read, its newline excluded: the HTTP body limit.
pub const MAX_LINE_BYTES: usize = MAX_BODY_BYTES;

/// The pipe between the reader task and the SDK's transport.
const PIPE_BYTES: usize = 64 * 1024;

const INVALID: &str = "code-runner::invalid_request";

/// The SDK's line transport, fed only lines the gate let through.
pub struct GatedLines<W: AsyncWrite + Send + Unpin + 'static> {
    inner: AsyncRwTransport<RoleServer, DuplexStream, W>,
    refusals: mpsc::Receiver<ServerJsonRpcMessage>,
}

/// A transport reading `read` through the gate and writing `write`.
pub fn transport<R, W>(read: R, write: W) -> GatedLines<W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (pipe, sdk_end) = tokio::io::duplex(PIPE_BYTES);
    let (refuse, refusals) = mpsc::channel(16);
    tokio::spawn(gate(tokio::io::BufReader::new(read), pipe, refuse));
    GatedLines {
        inner: AsyncRwTransport::new(sdk_end, write),
        refusals,
    }
}

/// Reads lines until the input ends (or the SDK's side goes away), passing
/// on those within the limits and refusing the rest.
async fn gate<R: AsyncBufRead + Unpin>(
    mut read: R,
    mut pipe: DuplexStream,
    refuse: mpsc::Sender<ServerJsonRpcMessage>,
) {
    let mut line = Vec::new();
    loop {
        let refusal = match next_line(&mut read, &mut line).await {
            Ok(Line::Eof) | Err(_) => return,
            Ok(Line::Oversized) => refusal_message(
                None,
                INVALID,
                format!(
                    "the message is over the {} MiB line limit",
                    MAX_LINE_BYTES / (1024 * 1024)
                ),
            ),
            Ok(Line::Whole) => {
                let shape = check_shape(
                    &line,
                    MAX_MESSAGE_DEPTH,
                    MAX_MESSAGE_VALUES,
                    "the JSON-RPC message",
                );
                match shape {
                    Ok(_) => {
                        if pipe.write_all(&line).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(message) => refusal_message(request_id(&line), INVALID, message),
                }
            }
        };
        if refuse.send(refusal).await.is_err() {
            return;
        }
    }
}

enum Line {
    /// A whole line, its newline included, is in the buffer.
    Whole,
    /// A line past [`MAX_LINE_BYTES`] was read and dropped.
    Oversized,
    /// The input ended (a last line without a newline is dropped, as the SDK does).
    Eof,
}

/// Reads one line into `line` without letting it grow past the limit.
async fn next_line<R: AsyncBufRead + Unpin>(
    read: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    line.clear();
    let mut oversized = false;
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::Eof);
        }
        let newline = available.iter().position(|byte| *byte == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        if !oversized {
            if line.len() + take > MAX_LINE_BYTES + 1 {
                oversized = true;
                *line = Vec::new();
            } else {
                line.extend_from_slice(&available[..take]);
            }
        }
        read.consume(take);
        if newline.is_some() {
            return Ok(if oversized {
                Line::Oversized
            } else {
                Line::Whole
            });
        }
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> Transport<RoleServer> for GatedLines<W> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            tokio::select! {
                message = self.inner.receive() => return message,
                Some(refusal) = self.refusals.recv() => {
                    // Sent on its own task: a receive cancelled by the
                    // service's select does not lose it.
                    tokio::spawn(self.inner.send(refusal));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}
