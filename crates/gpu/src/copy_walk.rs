//! How the copy probe's invocations walk their share (its own module: the device handle keeps the walk chosen
//! once, and the probe, which needs the device, chooses it).

/// How one invocation walks its share of the copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyVariant {
    pub items: u32,
    pub blocked: bool,
}

impl CopyVariant {
    /// The candidates the probe tries: coalesced (GPUs) and blocked (CPU adapters).
    pub const CANDIDATES: [CopyVariant; 3] = [
        CopyVariant {
            items: 4,
            blocked: false,
        },
        CopyVariant {
            items: 1,
            blocked: false,
        },
        CopyVariant {
            items: 16,
            blocked: true,
        },
    ];
    pub fn name(&self) -> String {
        format!(
            "vec4x{}-{}",
            self.items,
            if self.blocked { "blocked" } else { "strided" }
        )
    }
}
