//! Traces (issue 49): a span per bus call (a run, `register_function`,
//! `resume`, a published function's invocation, and each call guest code
//! makes with `iii.trigger`, nested in the turn that made it), a span per
//! guest `fetch`, continuing the caller's W3C trace context. This module
//! decides what a span is called, what it carries (the function, the
//! language, flavour, outcome, CPU and memory; never an id of a runtime,
//! code, output, a URL's path or a header) and where spans go: OTLP over
//! HTTP to `otlp_endpoint`, and the iii engine's own trace pipeline when the
//! worker is connected to one.
//!
//! Spans are queued and sent by the SDK's batch thread; its queue is
//! bounded ([`QUEUE`]), so a collector that is slow or gone costs dropped
//! spans, never a call's time or the host's memory. With no sink the spans
//! are not recorded at all, and a caller's trace context still passes
//! through to what the call starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use iii_helpers::observability::telemetry::connection::SharedEngineConnection;
use iii_helpers::observability::telemetry::span_exporter::EngineSpanExporter;
use iii_helpers::observability::telemetry::types::ReconnectionConfig;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    FutureExt, SpanKind, Status, TraceContextExt, Tracer, TracerProvider, WithContext,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanExporter,
};

/// Spans waiting for a sink, per sink; past it new ones are dropped.
const QUEUE: usize = 4096;
/// The longest span name and attribute text a span takes from a caller or
/// a guest (a function id, a host name): longer ones are cut.
const MAX_TEXT: usize = 256;
/// The longest a trace header or `_meta` value we read may be (W3C's
/// `tracestate` is at most 512 characters; `traceparent` is 55).
const MAX_HEADER: usize = 512;

/// The trace context a call continues: the caller's (a `traceparent`
/// header, MCP's `_meta`, the engine's invocation) or the span of the call
/// that made it. Empty: the call starts a trace of its own.
#[derive(Debug, Clone, Default)]
pub struct TraceParent(Context);

impl TraceParent {
    /// The context W3C `traceparent` and `tracestate` values name; an
    /// absent, oversized or malformed `traceparent` gives an empty one.
    pub fn from_w3c(traceparent: Option<&str>, tracestate: Option<&str>) -> TraceParent {
        let Some(traceparent) = traceparent.filter(|v| v.len() <= MAX_HEADER) else {
            return TraceParent::default();
        };
        let mut carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
        if let Some(state) = tracestate.filter(|v| v.len() <= MAX_HEADER) {
            carrier.insert("tracestate".into(), state.to_string());
        }
        TraceParent(TraceContextPropagator::new().extract(&carrier))
    }

    /// The context the current future is polled in: what the iii SDK sets
    /// around an engine's invocation (its `execute` span, a child of the
    /// engine's call span).
    pub fn current() -> TraceParent {
        TraceParent(Context::current())
    }

    /// The `traceparent` value of this context, if it is part of a trace.
    pub fn traceparent(&self) -> Option<String> {
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&self.0, &mut carrier);
        carrier.remove("traceparent")
    }

    /// `future`, polled in this context: what it sends through the iii
    /// SDK carries it as its `traceparent`.
    pub fn around<F: std::future::Future>(&self, future: F) -> WithContext<F> {
        future.with_context(self.0.clone())
    }

    /// Sets the attributes `make` builds on the span this context holds;
    /// when it holds none, or a span another process recorded, `make` is
    /// not called (no work on a call's path while nothing is traced).
    pub fn record(&self, make: impl FnOnce() -> Vec<KeyValue>) {
        let span = self.0.span();
        if span.is_recording() {
            span.set_attributes(make());
        }
    }
}

/// Where spans go.
#[derive(Debug, Default, Clone)]
pub struct Sinks {
    /// An OTLP/HTTP collector: its base URL or its `/v1/traces` URL.
    pub otlp: Option<String>,
    /// The iii engine's WebSocket URL, whose `/otel` endpoint takes spans.
    pub engine: Option<String>,
}

/// The worker's tracer: none until [`Traces::export`] gives it sinks.
#[derive(Default)]
pub struct Traces {
    sinks: Mutex<Sinks>,
    exporting: RwLock<Option<(SdkTracerProvider, SdkTracer)>>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("exporting", &self.on())
            .finish()
    }
}

/// Who made a call: the span of a host's call is the server side of the
/// caller's request; one guest code made is internal to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A host's call (HTTP, MCP, the CLI, an engine invocation).
    Host,
    /// A call guest code made (`iii.trigger`).
    Guest,
    /// A request leaving the worker (a guest's call through the engine, a
    /// guest's `fetch`).
    Outbound,
}

impl Traces {
    /// Sends spans to `more` too (the sinks it names join those given
    /// before; a sink given again is left as it is). Must run within the
    /// tokio runtime: the engine's connection is a task of it.
    ///
    /// # Errors
    /// The OTLP exporter could not be built (the message says why).
    pub fn export(&self, more: Sinks, service_instance: &str) -> Result<(), String> {
        let mut sinks = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = Sinks {
            otlp: sinks.otlp.clone().or(more.otlp),
            engine: sinks.engine.clone().or(more.engine),
        };
        if wanted.otlp == sinks.otlp && wanted.engine == sinks.engine {
            return Ok(());
        }
        let exporting = build(&wanted, service_instance)?;
        *sinks = wanted;
        let old = self
            .exporting
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .replace(exporting);
        if let Some((provider, _)) = old {
            // Its batch threads send what they hold, off the async workers.
            std::thread::spawn(move || drop(provider.shutdown()));
        }
        Ok(())
    }

    fn tracer(&self) -> Option<SdkTracer> {
        let exporting = self.exporting.read().unwrap_or_else(|p| p.into_inner());
        exporting.as_ref().map(|(_, tracer)| tracer.clone())
    }

    /// Whether spans are recorded (some sink takes them).
    pub fn on(&self) -> bool {
        self.tracer().is_some()
    }

    /// Opens the span of a call of `name`, within `parent`.
    pub fn start(&self, name: &str, kind: CallKind, parent: &TraceParent) -> CallSpan {
        let Some(tracer) = self.tracer() else {
            return CallSpan {
                cx: parent.0.clone(),
                recording: false,
            };
        };
        let kind = match kind {
            CallKind::Host => SpanKind::Server,
            CallKind::Guest => SpanKind::Internal,
            CallKind::Outbound => SpanKind::Client,
        };
        let span = tracer
            .span_builder(cut(name, MAX_TEXT))
            .with_kind(kind)
            .start_with_context(&tracer, &parent.0);
        CallSpan {
            cx: parent.0.with_span(span),
            recording: true,
        }
    }

    /// Opens the span of a guest's request through the host, `request`
    /// being its `{method, url, …}`: it carries the method and the host,
    /// never the URL's path or query, nor a header (either may hold a secret).
    pub fn fetch(&self, parent: &TraceParent, request: &serde_json::Value) -> CallSpan {
        let span = self.start("fetch", CallKind::Outbound, parent);
        span.parent().record(|| {
            let method = request["method"].as_str().unwrap_or("GET");
            let mut attributes = vec![KeyValue::new("http.request.method", cut(method, 16))];
            let url = request["url"]
                .as_str()
                .and_then(|u| url::Url::parse(u).ok());
            if let Some(url) = url {
                if let Some(host) = url.host_str() {
                    attributes.push(KeyValue::new("server.address", cut(host, MAX_TEXT)));
                }
                if let Some(port) = url.port_or_known_default() {
                    attributes.push(KeyValue::new("server.port", i64::from(port)));
                }
            }
            attributes
        });
        span
    }

    /// Sends the spans ended so far (at shutdown), waiting at most for the
    /// exporters' own timeouts.
    pub fn flush(&self) {
        let exporting = self.exporting.read().unwrap_or_else(|p| p.into_inner());
        if let Some((provider, _)) = exporting.as_ref() {
            let _ = provider.force_flush();
        }
    }
}

/// A call's span, ended by [`CallSpan::end`] (or, for a call dropped
/// before it answered, when dropped: an error, `abandoned`).
#[derive(Debug)]
pub struct CallSpan {
    cx: Context,
    recording: bool,
}

impl CallSpan {
    /// The context of what the call starts: its own span, or the caller's
    /// context when spans are not recorded.
    pub fn parent(&self) -> TraceParent {
        TraceParent(self.cx.clone())
    }

    /// Ends the span of a guest's request with its answer: the response's
    /// status, or the refusal's error code.
    pub fn end_fetch(self, answer: Result<&serde_json::Value, &str>) {
        match answer {
            Ok(response) => {
                if let Some(status) = response["status"].as_i64() {
                    self.parent()
                        .record(|| vec![KeyValue::new("http.response.status_code", status)]);
                }
                self.end(None);
            }
            Err(code) => self.end(Some(code)),
        }
    }

    /// Ends the span: ok, or an error with its code (never its message,
    /// which may quote guest output).
    pub fn end(mut self, error: Option<&str>) {
        self.finish(error);
    }

    fn finish(&mut self, error: Option<&str>) {
        if !std::mem::take(&mut self.recording) {
            return;
        }
        let span = self.cx.span();
        match error {
            None => span.set_status(Status::Ok),
            Some(code) => {
                span.set_attribute(KeyValue::new("code_runner.error", code.to_string()));
                span.set_status(Status::error(code.to_string()));
            }
        }
        span.end();
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        self.finish(Some("abandoned"));
    }
}

/// A tracer provider sending to `sinks`, and its tracer.
fn build(sinks: &Sinks, service_instance: &str) -> Result<(SdkTracerProvider, SdkTracer), String> {
    let resource = Resource::builder()
        .with_service_name("code-runner")
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", service_instance.to_string()),
        ])
        .build();
    let mut builder = SdkTracerProvider::builder().with_resource(resource);
    if let Some(endpoint) = &sinks.otlp {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(under(endpoint, "/v1/traces"))
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| format!("otlp_endpoint {endpoint}: {err}"))?;
        builder = builder.with_span_processor(batched(exporter, 500));
    }
    if let Some(engine) = &sinks.engine {
        let connection = SharedEngineConnection::with_channel_capacity(
            under(engine, "/otel"),
            ReconnectionConfig::default(),
            QUEUE,
        );
        let exporter = EngineSpanExporter::new(Arc::new(connection));
        builder = builder.with_span_processor(batched(exporter, 100));
    }
    let provider = builder.build();
    let tracer = provider.tracer("code-runner");
    Ok((provider, tracer))
}

/// A batch processor for `exporter`, sending every `delay_ms`.
fn batched(exporter: impl SpanExporter + 'static, delay_ms: u64) -> BatchSpanProcessor {
    let config = BatchConfigBuilder::default()
        .with_scheduled_delay(Duration::from_millis(delay_ms))
        .with_max_queue_size(QUEUE)
        .build();
    BatchSpanProcessor::builder(exporter)
        .with_batch_config(config)
        .build()
}

/// The first `max` characters of `text`.
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// `path` under `base`, unless `base` names it already: a collector's
/// traces URL (`/v1/traces`), the engine's telemetry endpoint (`/otel`,
/// where the iii SDK sends its own spans, apart from the worker's connection).
fn under(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(path) {
        base.to_string()
    } else {
        format!("{base}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_continued_and_a_bad_one_starts_afresh() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parent = TraceParent::from_w3c(Some(tp), Some("vendor=x"));
        assert_eq!(parent.traceparent().as_deref(), Some(tp));
        for bad in ["", "00-zz-00f067aa0ba902b7-01", &"0".repeat(600)] {
            assert_eq!(TraceParent::from_w3c(Some(bad), None).traceparent(), None);
        }
        assert_eq!(TraceParent::from_w3c(None, None).traceparent(), None);
    }

    #[test]
    fn without_a_sink_a_call_passes_its_callers_context_on() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let traces = Traces::default();
        let span = traces.start("x", CallKind::Host, &TraceParent::from_w3c(Some(tp), None));
        assert_eq!(span.parent().traceparent().as_deref(), Some(tp));
        span.end(None);
        assert!(!traces.on());
    }

    #[test]
    fn collector_urls() {
        let traces = |url| under(url, "/v1/traces");
        assert_eq!(traces("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(traces("http://c/v1/traces"), "http://c/v1/traces");
        assert_eq!(under("ws://e:49134", "/otel"), "ws://e:49134/otel");
    }
}
