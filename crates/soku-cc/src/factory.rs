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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hint::{ConnectionHint, HintSlot, RememberedPath};

    fn built(config: &Arc<SokuCcConfig>) -> SokuCc {
        let cc = config.clone().build(Instant::now(), 1200);
        *cc.into_any().downcast::<SokuCc>().expect("soku-cc")
    }

    #[test]
    fn a_late_background_hint_reaches_controllers_built_after_it() {
        let slot = HintSlot::new();
        let config = Arc::new(SokuCcConfig {
            rate_cap_bps: Some(5_000_000),
            hint: slot.clone(),
            ..SokuCcConfig::default()
        });
        assert!(!built(&config).is_background());
        let remembered =
            RememberedPath { bandwidth_bps: 10_000_000, min_rtt: Duration::from_millis(50) };
        assert!(slot.set(ConnectionHint { remembered: Some(remembered), background: true }));
        let cc = built(&config);
        assert!(cc.is_background());
        assert_eq!(cc.rate_cap_bps(), Some(5_000_000), "the rate cap stays");
        assert!(!slot.set(ConnectionHint::default()), "the first hint stays");
        assert_eq!(slot.remembered(), Some(remembered));
    }

    /// A server builds its controller as it accepts the client's handshake, which may
    /// come before the client's hello with `--background`: the controller turns to
    /// background mode when it next sends, before the data that follows the request.
    #[test]
    fn a_background_hint_after_the_build_turns_the_controller() {
        let slot = HintSlot::new();
        let config = Arc::new(SokuCcConfig { hint: slot.clone(), ..SokuCcConfig::default() });
        let mut cc = built(&config);
        let now = Instant::now();
        cc.on_sent(now, 1200, 0);
        assert!(!cc.is_background());
        let remembered =
            RememberedPath { bandwidth_bps: 10_000_000, min_rtt: Duration::from_millis(50) };
        assert!(slot.set(ConnectionHint { remembered: Some(remembered), background: true }));
        cc.on_sent(now, 1200, 1);
        assert!(cc.is_background());
        assert_eq!(cc.resume_phase(), crate::resume::Phase::Normal, "no jump in the background");
    }
}
