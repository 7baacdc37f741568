//! The demo's wire format: a 4-byte big-endian length, then a JSON body.
//!
//! A call carries the method, arguments, attachments and attributes; the provider answers
//! with its identity (address, region, IDC, group, tag), which is what the demo's report is
//! computed from.

use std::collections::BTreeMap;
use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 1 << 20;

/// One call, as sent to a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFrame {
    /// Matches the reply to the call.
    pub id: u64,
    /// The method called.
    pub method: String,
    /// The arguments.
    pub arguments: Vec<serde_json::Value>,
    /// Attachments (`dubbo.tag`...).
    pub attachments: BTreeMap<String, String>,
    /// Attributes (`group`...).
    pub attributes: BTreeMap<String, String>,
}

/// A provider's answer: who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyFrame {
    /// The call's id.
    pub id: u64,
    /// The provider's `host:port`.
    pub address: String,
    /// Its `region` param.
    pub region: String,
    /// Its `idc` param.
    pub idc: String,
    /// Its `group` param.
    pub group: Option<String>,
    /// Its `dubbo.tag` param.
    pub tag: Option<String>,
    /// Its `canary=true` param.
    #[serde(default)]
    pub canary: bool,
    /// The method it executed.
    pub method: String,
}

/// Writes one frame.
pub async fn write_frame<W, T>(w: &mut W, value: &T) -> io::Result<()>
where
    W: AsyncWriteExt + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame too large",
        ));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf).await?;
    w.flush().await
}

/// Reads one frame.
pub async fn read_frame<R, T>(r: &mut R) -> io::Result<T>
where
    R: AsyncReadExt + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_frames_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(64 * 1024);
        let call = CallFrame {
            id: 7,
            method: "getUser".into(),
            arguments: vec![serde_json::json!("u-1")],
            attachments: [("dubbo.tag".to_string(), "gray".to_string())].into(),
            attributes: [("group".to_string(), "idx_user".to_string())].into(),
        };
        write_frame(&mut a, &call).await.unwrap();
        let got: CallFrame = read_frame(&mut b).await.unwrap();
        assert_eq!(got, call);
        a.write_all(&(MAX_FRAME as u32 + 1).to_be_bytes())
            .await
            .unwrap();
        let err = read_frame::<_, CallFrame>(&mut b).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
