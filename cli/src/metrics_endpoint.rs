//! `fencelock run --metrics-addr HOST:PORT`: the client's metrics in the
//! Prometheus text format at `http://HOST:PORT/metrics` while fencelock
//! runs. The core reports to the `metrics` crate's facade; the Prometheus
//! recorder installed here renders what it got, and a small HTTP server on
//! a listener bound here (so port 0 works, and the address is printed)
//! answers scrapes from a thread of its own.

use std::net::{SocketAddr, TcpListener};

use metrics_exporter_prometheus::PrometheusBuilder;

/// Installs the recorder and starts serving on `addr`; returns the bound
/// address. Fails (and serves nothing) when the address cannot be bound.
pub fn serve(addr: &str) -> Result<SocketAddr, String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr} for --metrics-addr: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let server = tiny_http::Server::from_listener(listener, None)
        .map_err(|e| format!("cannot serve metrics on {bound}: {e}"))?;
    let handle = PrometheusBuilder::new()
        .set_buckets(&fencelock::LATENCY_BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("cannot set up the metrics recorder: {e}"))?;
    std::thread::Builder::new()
        .name("fencelock-metrics".to_owned())
        .spawn(move || {
            for request in server.incoming_requests() {
                let response = match request.url() {
                    "/metrics" => tiny_http::Response::from_string(handle.render()).with_header(
                        "Content-Type: text/plain; version=0.0.4"
                            .parse::<tiny_http::Header>()
                            .expect("a valid header"),
                    ),
                    _ => tiny_http::Response::from_string("fencelock serves /metrics only\n")
                        .with_status_code(404),
                };
                // A scraper that went away is no concern of the lock.
                let _ = request.respond(response);
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(bound)
}
