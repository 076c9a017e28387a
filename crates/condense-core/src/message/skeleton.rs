//! The skeleton parser: one lenient pass over a message's JSON that reads
//! only the fields the skeleton holds and skims everything else.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{MessageError, MessageSummaryRef, Role, Skeleton, ToolCallBlock, SUMMARY_CUSTOM_TYPE};

#[derive(Deserialize)]
struct SkeletonDe<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "toolCallId")]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "toolName")]
    tool_name: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "isError")]
    is_error: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "customType")]
    custom_type: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<ContentDe<'a>>,
    #[serde(borrow, default)]
    details: Option<&'a RawValue>,
}

/// `content` read in the same pass as the rest of the message: a string,
/// an array of blocks (each skimmed for the fields the skeleton needs), or
/// anything else (ignored).
pub(super) enum ContentDe<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<BlockDe<'a>>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for ContentDe<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = ContentDe<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("message content")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(ContentDe::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ContentDe::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::new();
                // A block that is not an object (a string, a number) is kept
                // as an empty block so positions stay right.
                while let Some(b) = seq.next_element::<BlockOrOther<'a>>()? {
                    blocks.push(b.0);
                }
                Ok(ContentDe::Blocks(blocks))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ContentDe::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ContentDe::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ContentDe::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ContentDe::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ContentDe::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ContentDe::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

struct BlockOrOther<'a>(BlockDe<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for BlockOrOther<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = BlockOrOther<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut b = BlockDe::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "type" => b.kind = Some(map.next_value()?),
                        "id" => b.id = Some(map.next_value()?),
                        "name" => b.name = Some(map.next_value()?),
                        "text" => b.text = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(BlockOrOther(b))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(BlockOrOther(BlockDe::default()))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The fields of a content block the skeleton reads (raw, unparsed).
#[derive(Default)]
pub(super) struct BlockDe<'a> {
    pub(super) kind: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    name: Option<&'a RawValue>,
    pub(super) text: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct DetailsDe<'a> {
    #[serde(borrow, default, rename = "toolCallRefs")]
    tool_call_refs: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RefDe<'a> {
    #[serde(borrow, default, rename = "toolCallId")]
    tool_call_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "resultTimestamp")]
    result_timestamp: Option<&'a RawValue>,
}

/// A raw JSON value as a string, if it is one.
pub(super) fn raw_str(raw: Option<&RawValue>) -> Option<String> {
    let raw = raw?;
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str::<String>(raw.get()).ok()
}

/// A raw JSON value as an integral number, if it is one.
pub(crate) fn raw_int(raw: Option<&RawValue>) -> Option<i64> {
    let text = raw?.get();
    if let Ok(n) = text.parse::<i64>() {
        return Some(n);
    }
    let f: f64 = serde_json::from_str(text).ok()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).then_some(f as i64)
}

pub(super) fn parse_skeleton(json: &str) -> Result<Skeleton, MessageError> {
    let trimmed = json.trim_start();
    if !trimmed.starts_with('{') {
        // Validate first so a non-JSON text reports a JSON error.
        serde_json::from_str::<IgnoredAny>(json)?;
        return Err(MessageError::NotAnObject);
    }
    let de: SkeletonDe = serde_json::from_str(json)?;
    let mut sk = Skeleton {
        role: de.role.as_deref().map(Role::from_name),
        timestamp: raw_int(de.timestamp),
        ..Skeleton::default()
    };
    if sk.timestamp.is_none() {
        sk.timestamp_other = de.timestamp.map(|r| r.get().into());
    }
    let role = sk.role.clone();
    match role {
        Some(Role::ToolResult) => {
            sk.tool_call_id = de.tool_call_id.map(Cow::into_owned);
            sk.tool_name = de.tool_name.map(Cow::into_owned);
            sk.is_error = de.is_error.is_some_and(|r| r.get() == "true");
        }
        Some(Role::Custom) => {
            sk.custom_type = raw_str(de.custom_type);
            if sk.custom_type.as_deref() == Some(SUMMARY_CUSTOM_TYPE) {
                sk.summary_refs = parse_summary_refs(de.details);
            }
        }
        _ => {}
    }
    match de.content {
        Some(ContentDe::Blocks(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                let kind = block.kind.map(|k| k.get());
                match kind {
                    Some("\"toolCall\"") => {
                        sk.has_tool_call_block = true;
                        if let Some(id) = raw_str(block.id).filter(|id| !id.is_empty()) {
                            let name = raw_str(block.name).unwrap_or_default();
                            sk.tool_calls.push(ToolCallBlock { id, name });
                        }
                    }
                    Some("\"thinking\"") => sk.thinking_blocks += 1,
                    _ => {}
                }
                if i == 0 && sk.role == Some(Role::User) {
                    if let Some(first) = raw_str(block.text) {
                        sk.is_synthetic_chain = kind == Some("\"text\"")
                            && first.trim_start().starts_with("<compressed-chain");
                        sk.compressed_chain_id = compressed_chain_id(&first);
                    }
                }
            }
        }
        Some(ContentDe::Text(text)) if sk.role == Some(Role::User) => {
            sk.is_synthetic_chain = text.trim_start().starts_with("<compressed-chain");
        }
        _ => {}
    }
    // Skeletons live as long as the branch: drop the spare room growth
    // left (a `Vec`'s first allocation holds four, most messages have one).
    sk.tool_calls.shrink_to_fit();
    sk.summary_refs.shrink_to_fit();
    Ok(sk)
}

/// `^<compressed-chain id="([^"]+)"` on a text.
fn compressed_chain_id(text: &str) -> Option<String> {
    let rest = text.strip_prefix("<compressed-chain id=\"")?;
    let end = rest.find('"')?;
    (end > 0).then(|| rest[..end].to_owned())
}

fn parse_summary_refs(details: Option<&RawValue>) -> Vec<MessageSummaryRef> {
    let Some(details) = details else {
        return Vec::new();
    };
    let Ok(d) = serde_json::from_str::<DetailsDe>(details.get()) else {
        return Vec::new();
    };
    let Some(refs) = d.tool_call_refs else {
        return Vec::new();
    };
    let refs: Vec<RefDe> = serde_json::from_str(refs.get()).unwrap_or_default();
    refs.into_iter()
        .filter_map(|r| {
            Some(MessageSummaryRef {
                tool_call_id: raw_str(r.tool_call_id)?,
                result_timestamp: raw_int(r.result_timestamp),
            })
        })
        .collect()
}
