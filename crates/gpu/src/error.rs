//! The one error type of the device layer. Every fallible call returns it; nothing here panics on bad input.

/// Errors from adapter selection, resource creation, shader validation and execution.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter matched; the message names the fix.
    #[error(
        "no GPU adapter found ({detail}). Install a Vulkan, Metal or DX12 driver; on a GPU-less Linux \
         machine run `apt-get install mesa-vulkan-drivers` to get Mesa's software Vulkan driver (lavapipe)"
    )]
    NoAdapter { detail: String },

    /// The adapter exists but refused to open a device.
    #[error("adapter `{adapter}` refused to open a device: {message}")]
    RequestDevice { adapter: String, message: String },

    /// A size or count over one of the device's limits.
    #[error("{what}: asked for {asked}, the adapter's maximum is {max}")]
    LimitExceeded { what: String, asked: u64, max: u64 },

    /// A feature the kernel needs is not on this adapter.
    #[error("kernel `{kernel}` needs the {feature} feature, which adapter `{adapter}` lacks")]
    MissingFeature {
        kernel: String,
        feature: &'static str,
        adapter: String,
    },

    /// naga rejected a WGSL source; `diagnostic` is naga's rendered report with the source line.
    #[error("shader `{kernel}` failed validation:\n{diagnostic}")]
    InvalidShader { kernel: String, diagnostic: String },

    /// Arguments that do not fit a kernel's bindings or a buffer's size.
    #[error("{0}")]
    InvalidArgument(String),

    /// wgpu reported a validation or out-of-memory error.
    #[error("wgpu error while {context}: {message}")]
    Wgpu { context: String, message: String },

    /// The device was lost (driver reset, out of memory, watchdog).
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),

    /// Reading or writing an on-disk cache.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl GpuError {
    /// Whether the failure is one kernel's own (wgpu or the driver refused its pipeline or a launch, a limit it
    /// passes, naga's validation, a feature it needs) rather than the device's (lost, not opened) or the host's
    /// (a cache file): a tuner that meets it in one candidate goes on with the others.
    pub fn is_kernels_own(&self) -> bool {
        matches!(
            self,
            Self::Wgpu { .. }
                | Self::LimitExceeded { .. }
                | Self::InvalidShader { .. }
                | Self::MissingFeature { .. }
        )
    }
}

/// Result alias for the device layer.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// Runs `f` inside validation and out-of-memory error scopes of `device` and turns a captured error into `Err`.
pub(crate) fn scoped<T>(device: &wgpu::Device, context: &str, f: impl FnOnce() -> T) -> Result<T> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let val = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = f();
    let v = pollster::block_on(val.pop());
    let o = pollster::block_on(oom.pop());
    match v.or(o) {
        Some(e) => Err(GpuError::Wgpu {
            context: context.to_owned(),
            message: e.to_string(),
        }),
        None => Ok(out),
    }
}
