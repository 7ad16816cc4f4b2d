//! One lattice's nine direction arrays on the device: nine buffers (the default), or one buffer holding them a
//! fixed stride apart, so a step kernel binds them all once and indexes `a[i·S + k]` — as a CUDA code keeps
//! its structure of arrays in one allocation. Every other kernel (macroscopic, probe, halo) binds each
//! direction as a window of that buffer; the stride is rounded up to the adapter's storage offset alignment.

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Window, packed_len};

use crate::error::{LbmError, Result};

/// The nine direction arrays of one lattice.
#[derive(Debug)]
pub(crate) struct Pops {
    bufs: Vec<GpuBuffer<u32>>,
    /// Words of each direction.
    words: usize,
    /// Words from one direction's start to the next in the one buffer; 0 when each has its own buffer.
    stride: usize,
}

/// Bytes of one buffer holding the nine directions of `words` words each, each start aligned to `align_bytes`
/// (an adapter's storage offset alignment; without a device, for checking sizes against another's limits).
pub fn one_buffer_bytes(words: usize, align_bytes: u32) -> u64 {
    9 * packed_len::<u32>(words, align_bytes) as u64 * 4
}

/// Why nine directions of `words` words each cannot share one buffer on `gpu` (None: they can).
pub(crate) fn one_buffer_misfit(gpu: &Gpu, words: usize) -> Option<String> {
    let bytes = one_buffer_bytes(words, gpu.limits().min_storage_buffer_offset_alignment);
    let max_buffer = gpu.limits().max_buffer_size;
    let binding = gpu.binding_limit();
    if bytes > max_buffer.min(binding) {
        return Some(format!(
            "one buffer for all nine directions needs {bytes} bytes, past the adapter's limit of {} bytes per \
             buffer and binding",
            max_buffer.min(binding)
        ));
    }
    // The kernel indexes the buffer with 32-bit integers (f16 elements: two per word).
    if bytes / 2 > u64::from(u32::MAX) {
        return Some(format!(
            "one buffer for all nine directions needs {bytes} bytes, past what 32-bit indices reach"
        ));
    }
    None
}

impl Pops {
    /// Nine zeroed directions of `words` words: in one buffer when `one`, else one buffer each.
    pub(crate) fn alloc(gpu: &Gpu, words: usize, one: bool) -> Result<Self> {
        if one {
            if let Some(why) = one_buffer_misfit(gpu, words) {
                return Err(LbmError::Unsupported(why));
            }
            let stride = gpu.packed_len::<u32>(words);
            Ok(Self {
                bufs: vec![gpu.alloc_filled::<u32>(9 * stride, 0)?],
                words,
                stride,
            })
        } else {
            let bufs = (0..9)
                .map(|_| gpu.alloc_filled::<u32>(words, 0).map_err(LbmError::from))
                .collect::<Result<_>>()?;
            Ok(Self {
                bufs,
                words,
                stride: 0,
            })
        }
    }

    /// The stride in words between directions when they share one buffer.
    pub(crate) fn stride(&self) -> Option<usize> {
        (self.stride > 0).then_some(self.stride)
    }

    /// Direction `i`'s buffer and where its words start in it.
    fn place(&self, i: usize) -> (&GpuBuffer<u32>, usize) {
        match self.stride {
            0 => (&self.bufs[i], 0),
            s => (&self.bufs[0], i * s),
        }
    }

    /// Direction `i` as a storage argument (a window of the one buffer, or its own buffer).
    pub(crate) fn dir_arg(&self, i: usize) -> Arg<'_> {
        let (buf, offset) = self.place(i);
        buf.window_arg(Window {
            offset,
            len: self.words,
        })
    }

    /// The nine directions as nine storage arguments, in direction order.
    pub(crate) fn dir_args(&self) -> Vec<Arg<'_>> {
        (0..9).map(|i| self.dir_arg(i)).collect()
    }

    /// The arguments a kernel of this lattice binds: the one buffer whole, or the nine directions.
    pub(crate) fn kernel_args(&self) -> Vec<Arg<'_>> {
        match self.stride {
            0 => self.dir_args(),
            _ => vec![self.bufs[0].arg()],
        }
    }

    /// Writes direction `i`'s words.
    pub(crate) fn write(&self, gpu: &Gpu, i: usize, data: &[u32]) -> Result<()> {
        if data.len() != self.words {
            return Err(LbmError::Shape(format!(
                "{} words for a direction of {}",
                data.len(),
                self.words
            )));
        }
        let (buf, offset) = self.place(i);
        Ok(gpu.write(buf, offset, data)?)
    }

    /// Reads direction `i`'s words.
    pub(crate) fn read(&self, gpu: &Gpu, i: usize) -> Result<Vec<u32>> {
        let (buf, offset) = self.place(i);
        Ok(gpu.read_range(buf, offset..offset + self.words)?)
    }

    /// Fills every word (the padding between directions too) with `value`.
    pub(crate) fn fill(&self, gpu: &Gpu, value: u32) -> Result<()> {
        for b in &self.bufs {
            gpu.fill(b, value)?;
        }
        Ok(())
    }
}
