//! The factory quinn calls once per connection: a [`SokuCc`] for each, built from one
//! [`SokuCcConfig`].

use std::sync::Arc;
use std::time::Instant;

use quinn_proto::congestion::{Controller, ControllerFactory};

use crate::config::SokuCcConfig;
use crate::model::SokuCc;

impl ControllerFactory for SokuCcConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        // The hint may have asked for background mode after this factory was made.
        let config = if self.hint.background() && !self.background {
            Arc::new(self.in_background())
        } else {
            self
        };
        Box::new(SokuCc::new(config, now, current_mtu))
    }
}
