//! The summarizer's thinking level (`summarizerThinking`).

use std::fmt;
use std::str::FromStr;

/// How much the summarizer model should think before answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThinkingLevel {
    /// Leave the model's own default alone: send no thinking parameter.
    #[default]
    Default,
    /// Ask for no thinking (providers send no effort, as pi-condense did).
    Off,
    /// The smallest effort.
    Minimal,
    /// Low effort.
    Low,
    /// Medium effort.
    Medium,
    /// High effort.
    High,
    /// The largest effort.
    XHigh,
}

impl ThinkingLevel {
    /// Every level, in the order the settings overlay cycles them.
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Default,
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::XHigh,
    ];

    /// Every level as `(config spelling, label)`, in [`ThinkingLevel::ALL`]'s
    /// order: the choices a settings menu offers.
    pub const CHOICES: [(&'static str, &'static str); 7] = {
        let mut out = [("", ""); 7];
        let mut i = 0;
        while i < out.len() {
            out[i] = (
                ThinkingLevel::ALL[i].as_str(),
                ThinkingLevel::ALL[i].label(),
            );
            i += 1;
        }
        out
    };

    /// The config spelling (`default`, `off`, …, `xhigh`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Default => "default",
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::XHigh => "xhigh",
        }
    }

    /// The label pi-condense shows (`Default`, `Off`, …, `XHigh`).
    pub const fn label(self) -> &'static str {
        match self {
            ThinkingLevel::Default => "Default",
            ThinkingLevel::Off => "Off",
            ThinkingLevel::Minimal => "Minimal",
            ThinkingLevel::Low => "Low",
            ThinkingLevel::Medium => "Medium",
            ThinkingLevel::High => "High",
            ThinkingLevel::XHigh => "XHigh",
        }
    }

    /// Parses the config spelling; anything else is `None`.
    pub fn parse(s: &str) -> Option<ThinkingLevel> {
        ThinkingLevel::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// Whether a request should carry an explicit effort (not `default`
    /// or `off`).
    pub fn effort(self) -> Option<ThinkingLevel> {
        match self {
            ThinkingLevel::Default | ThinkingLevel::Off => None,
            level => Some(level),
        }
    }
}

impl FromStr for ThinkingLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ThinkingLevel::parse(s).ok_or_else(|| format!("unknown thinking level {s:?}"))
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_and_label() {
        for level in ThinkingLevel::ALL {
            assert_eq!(ThinkingLevel::parse(level.as_str()), Some(level));
            assert_eq!(level.to_string().parse::<ThinkingLevel>(), Ok(level));
        }
        assert_eq!(ThinkingLevel::parse("max"), None);
        assert_eq!(ThinkingLevel::Off.effort(), None);
        assert_eq!(ThinkingLevel::High.effort(), Some(ThinkingLevel::High));
        assert_eq!(ThinkingLevel::CHOICES[0], ("default", "Default"));
        assert_eq!(ThinkingLevel::CHOICES[6], ("xhigh", "XHigh"));
    }
}
