//! The default connector's connections, against a plain HTTP/2 server on 127.0.0.1 that
//! counts the connections it accepts: one multiplexed connection per provider, shared by
//! concurrent calls; closed after the idle timeout and made again by the next call; a
//! refused connect is an error of its own.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo};
use routechain_core::Provider;
use routechain_tower::{HttpConnector, HttpError, MakeChannel, RequestBody};
use tokio::net::TcpListener;
use tower_service::Service as _;

/// A server answering every request with an empty 200; returns its address and the number
/// of connections it accepted, and the number still open.
async fn server() -> (String, Arc<AtomicU64>, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().unwrap().to_string();
    let (accepted, open) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (a, o) = (accepted.clone(), open.clone());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            o.fetch_add(1, Ordering::SeqCst);
            let o = o.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
                o.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (address, accepted, open)
}

fn provider(address: &str) -> Provider {
    format!("tri://{address}/helloworld.Greeter")
        .parse()
        .expect("provider URL")
}

fn request() -> http::Request<RequestBody> {
    http::Request::post("/helloworld.Greeter/SayHello")
        .body(RequestBody::empty())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_one_connection_closed_when_idle_and_made_again() {
    let (address, accepted, open) = server().await;
    let connector =
        HttpConnector::with_timeouts(Duration::from_secs(1), Duration::from_millis(300));
    let channel = connector.make_channel(&provider(&address)).unwrap();

    let calls = (0..32).map(|_| {
        let mut channel = channel.clone();
        tokio::spawn(async move { channel.call(request()).await })
    });
    for call in calls.collect::<Vec<_>>() {
        assert_eq!(call.await.unwrap().expect("answered").status(), 200);
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for 32 calls"
    );

    // Used within every idle period: kept.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        channel.clone().call(request()).await.expect("answered");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a used connection stays"
    );

    // Unused for two idle periods: closed (the server sees it end), then made again.
    let closed = async {
        while open.load(Ordering::SeqCst) != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(3), closed)
        .await
        .expect("the idle connection closes");
    channel.clone().call(request()).await.expect("answered");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "made again after the idle close"
    );
}

#[tokio::test]
async fn a_refused_connect_is_a_connect_error_and_the_next_call_connects_again() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let channel = HttpConnector::new()
        .make_channel(&provider(&address))
        .unwrap();
    for _ in 0..2 {
        match channel.clone().call(request()).await {
            Err(HttpError::Connect { address: a, .. }) => assert_eq!(&*a, address),
            other => panic!("expected a connect error, got {other:?}"),
        }
    }
}
