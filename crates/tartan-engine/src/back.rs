//! The components' way back to the flows: what a component below them
//! asks of them (start deferred work again, ...) without holding them.
//! Weak, since the engine owns the components that hold it; once the
//! engine is gone there is nothing to ask.

use std::sync::Weak;

use tartan_core::bulk::BulkAction;
use tartan_store::WorkKey;

use crate::timers::Timer;
use crate::{Engine, EngineError, Inner};

#[derive(Default)]
pub(crate) struct Back(pub(crate) Weak<Inner>);

impl Back {
    fn engine(&self) -> Option<Engine> {
        self.0.upgrade().map(|inner| Engine { inner })
    }
}

impl crate::health::Resume for Back {
    fn resume(&self, key: WorkKey) {
        if let Some(engine) = self.engine() {
            engine.fire(Timer::Retry { key, claim: false });
        }
    }
}

impl crate::bulk::FlowActions for Back {
    fn act<'a>(&'a self, flow_id: &'a str, action: BulkAction, by: &'a str) -> crate::bulk::Acting<'a> {
        Box::pin(async move {
            let Some(engine) = self.engine() else {
                return Err(EngineError::ShuttingDown);
            };
            match action {
                BulkAction::Retry { reset_attempts } => {
                    engine
                        .retry_flow(flow_id, reset_attempts, Some(by.to_string()))
                        .await
                }
                BulkAction::Cancel { compensate } => engine.cancel_flow(flow_id, compensate, Some(by)).await,
                BulkAction::Resume { reset_attempts } => engine
                    .resume_flow(flow_id, reset_attempts, Some(by.to_string()))
                    .await
                    .map(|_| ()),
            }
        })
    }
}
