//! Work that overlaps with the host: submit without waiting, and read a small buffer back once the work before
//! it is done while the device goes on with what was submitted after it. This is what a halo exchange needs:
//! pack the boundary and start its readback, submit the interior, talk to the other ranks while it runs.

use std::sync::mpsc::{Receiver, channel};

use bytemuck::Pod;

use crate::buffer::GpuBuffer;
use crate::context::Gpu;
use crate::dispatch::Launch;
use crate::error::{GpuError, Result};

/// A readback in flight (`Gpu::submit_read`); `Gpu::finish_read` waits for it.
#[derive(Debug)]
#[must_use = "finish the read with Gpu::finish_read"]
pub struct PendingRead<T: Pod> {
    staging: Option<wgpu::Buffer>,
    index: Option<wgpu::SubmissionIndex>,
    mapped: Option<Receiver<std::result::Result<(), wgpu::BufferAsyncError>>>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl Gpu {
    /// Records `launches` in order and submits them without waiting; they run after everything submitted before.
    pub fn submit(&self, launches: &[&Launch]) -> Result<()> {
        if launches.is_empty() {
            return Ok(());
        }
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for l in launches {
                l.record(&mut pass);
            }
        }
        self.submit_commands([enc.finish()]);
        self.check_async_errors("submitting kernels")
    }

    /// Records `launches`, then a copy of the first `len` elements of `src` into a staging buffer, and submits
    /// them without waiting. Work submitted afterwards runs on; `finish_read` waits only for this submission.
    pub fn submit_read<T: Pod>(
        &self,
        launches: &[&Launch],
        src: &GpuBuffer<T>,
        len: usize,
    ) -> Result<PendingRead<T>> {
        if len > src.len() {
            return Err(GpuError::InvalidArgument(format!(
                "readback of {len} elements from a buffer of {}",
                src.len()
            )));
        }
        let bytes = (len * size_of::<T>()) as u64;
        let mut enc = self.device.create_command_encoder(&Default::default());
        if !launches.is_empty() {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for l in launches {
                l.record(&mut pass);
            }
        }
        if bytes == 0 {
            self.submit_commands([enc.finish()]);
            return Ok(PendingRead {
                staging: None,
                index: None,
                mapped: None,
                len,
                _t: Default::default(),
            });
        }
        if !bytes.is_multiple_of(4) {
            return Err(GpuError::InvalidArgument(format!(
                "an overlapped readback must span a multiple of 4 bytes ({bytes} asked)"
            )));
        }
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("overlapped readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.copy_buffer_to_buffer(src.raw(), 0, &staging, 0, bytes);
        let (tx, rx) = channel();
        enc.map_buffer_on_submit(&staging, wgpu::MapMode::Read, 0..bytes, move |r| {
            let _ = tx.send(r);
        });
        let index = self.submit_commands([enc.finish()]);
        self.check_async_errors("submitting an overlapped readback")?;
        Ok(PendingRead {
            staging: Some(staging),
            index: Some(index),
            mapped: Some(rx),
            len,
            _t: Default::default(),
        })
    }

    /// Waits for the submission of `p` (not for work submitted after it) and returns the elements read.
    pub fn finish_read<T: Pod>(&self, p: PendingRead<T>) -> Result<Vec<T>> {
        let (Some(staging), Some(rx)) = (p.staging, p.mapped) else {
            return Ok(Vec::new());
        };
        let context = "finishing an overlapped readback";
        self.wait_mapped(p.index, &rx, context)?;
        let mut out = vec![T::zeroed(); p.len];
        {
            let view = staging.get_mapped_range(..).map_err(|e| GpuError::Wgpu {
                context: context.to_owned(),
                message: format!("{e:?}"),
            })?;
            bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&view);
        }
        staging.unmap();
        Ok(out)
    }

    /// Waits until everything submitted so far has run.
    pub fn finish(&self) -> Result<()> {
        self.wait(None, "waiting for submitted work")
    }
}
