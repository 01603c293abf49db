//! The publisher against a real NATS: `Nats-Msg-Id` = the event id, so the stream keeps one
//! copy of an envelope published twice.

use wharf_nats::{Publisher, PublisherConfig};

use crate::support::{Fx, bytes, nats_url};

#[tokio::test]
async fn the_same_envelope_published_twice_is_stored_once() {
    let Some(url) = nats_url("outbound published twice") else {
        return;
    };
    let fx = Fx::new(url).await;
    let subject = fx.subject("acme", "p1");
    fx.js
        .create_stream(async_nats::jetstream::stream::Config {
            name: fx.stream.clone(),
            subjects: vec![format!("{}.>", fx.prefix)],
            ..Default::default()
        })
        .await
        .unwrap();
    let publisher = Publisher::new(PublisherConfig::default());
    let envelope = fx.envelope();
    let authorization = format!("Bearer {}", fx.token);
    let headers = [("Authorization", authorization.as_str())];
    let first = publisher
        .publish(
            &fx.nats_url,
            &subject,
            &envelope.event_id,
            &headers,
            bytes(&envelope),
        )
        .await
        .unwrap();
    let second = publisher
        .publish(
            &fx.nats_url,
            &subject,
            &envelope.event_id,
            &headers,
            bytes(&envelope),
        )
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(second.duplicate);
    assert_eq!(first.sequence, second.sequence);
    let mut stream = fx.js.get_stream(&fx.stream).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);

    // Another envelope is another message.
    let other = fx.envelope();
    let third = publisher
        .publish(
            &fx.nats_url,
            &subject,
            &other.event_id,
            &headers,
            bytes(&other),
        )
        .await
        .unwrap();
    assert!(!third.duplicate);
    assert_eq!(stream.info().await.unwrap().state.messages, 2);

    // A subject no stream holds: not stored, and said so.
    let missing = publisher
        .publish(
            &fx.nats_url,
            "nobody.listens.here",
            &other.event_id,
            &headers,
            bytes(&other),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(missing, wharf_nats::Error::Publish { sent: false, .. }),
        "{missing:?}"
    );
    fx.cleanup().await;
}
