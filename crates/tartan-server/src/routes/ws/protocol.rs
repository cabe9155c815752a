//! The messages of Argyll's WebSocket protocol and what a subscription
//! names.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tartan_core::ids::MAX_CHILD_FLOW_ID_LEN as MAX_FLOW_ID_LEN;

use super::*;

/// What a client sends.
#[derive(Deserialize)]
pub(super) struct ClientMessage {
    #[serde(rename = "type")]
    pub(super) kind: String,
    #[serde(default)]
    pub(super) data: Value,
}

/// `data` of a subscribe (Argyll's `ClientSubscription`).
#[derive(Deserialize)]
pub(super) struct SubscribeData {
    pub(super) sub_id: Option<String>,
    pub(super) aggregate_ids: Option<Vec<Vec<String>>>,
    pub(super) event_types: Option<Vec<String>>,
    pub(super) include_state: Option<bool>,
}

/// An event, in Argyll's envelope.
#[derive(Serialize)]
pub(super) struct Envelope<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'a str,
    pub(super) sub_id: &'a str,
    pub(super) data: &'a Value,
    pub(super) id: &'a [&'a str],
    /// Unix milliseconds.
    pub(super) timestamp: i64,
    pub(super) sequence: i64,
}

/// A message the server could not act on.
#[derive(Serialize)]
pub(super) struct ErrorMessage<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sub_id: Option<&'a str>,
    pub(super) error: &'a str,
}

/// What an aggregate id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Aggregate {
    Catalog,
    Cluster,
    /// `["flow"]`: every flow (Argyll matches aggregate ids as prefixes).
    Flows,
    Flow(String),
}

impl Aggregate {
    pub(super) fn parse(parts: &[String]) -> Result<Aggregate, String> {
        match parts {
            [a] if a == "catalog" => Ok(Aggregate::Catalog),
            [a] if a == "cluster" => Ok(Aggregate::Cluster),
            [a] if a == "flow" => Ok(Aggregate::Flows),
            [a, id] if a == "flow" && !id.is_empty() && id.len() <= MAX_FLOW_ID_LEN => {
                Ok(Aggregate::Flow(id.clone()))
            }
            [a, id] if a == "flow" && !id.is_empty() => Err(format!(
                "aggregate_ids: a flow id is at most {MAX_FLOW_ID_LEN} bytes, got {}",
                id.len()
            )),
            _ => {
                let shown: Vec<String> = parts.iter().take(3).map(|p| clip(p)).collect();
                Err(format!(
                    "aggregate_ids: {shown:?} is not an aggregate id: expected [\"catalog\"], \
                     [\"cluster\"], [\"flow\"] or [\"flow\", \"<flow id>\"]"
                ))
            }
        }
    }

    pub(super) fn id(&self) -> Vec<&str> {
        match self {
            Aggregate::Catalog => vec!["catalog"],
            Aggregate::Cluster => vec!["cluster"],
            Aggregate::Flows => vec!["flow"],
            Aggregate::Flow(id) => vec!["flow", id],
        }
    }
}

/// One subscription: what it follows, and where each followed aggregate's
/// live events start (after the state it was sent).
pub(super) struct Subscription {
    /// No aggregate ids: every event.
    pub(super) everything: bool,
    pub(super) catalog: bool,
    /// The cluster's events (`step_health_changed`).
    pub(super) cluster: bool,
    pub(super) all_flows: bool,
    pub(super) flows: HashSet<String>,
    /// `None`: every type.
    pub(super) types: Option<HashSet<String>>,
    pub(super) include_state: bool,
    pub(super) catalog_from: i64,
    pub(super) flow_from: HashMap<String, i64>,
    /// Aggregate ids named, counted against `MAX_AGGREGATES`.
    pub(super) size: usize,
}

impl Subscription {
    pub(super) fn wants_flow(&self, id: &str) -> bool {
        self.everything || self.all_flows || self.flows.contains(id)
    }

    pub(super) fn wants_catalog(&self) -> bool {
        self.everything || self.catalog
    }

    pub(super) fn wants_cluster(&self) -> bool {
        self.everything || self.cluster
    }

    pub(super) fn wants_type(&self, kind: &str) -> bool {
        self.types.as_ref().is_none_or(|t| t.contains(kind))
    }
}
