//! One lattice's nine direction arrays on the device, always as few allocations as the adapter's buffer limit
//! allows (one where it fits), each direction a fixed stride from the last (rounded up to the storage offset
//! alignment). A step kernel binds them as nine windows (the default), or — where the tuner chose it and one
//! binding can hold them — binds the one buffer once and indexes `a[i·S + k]`, as a CUDA code keeps its structure
//! of arrays in one allocation. Every other kernel (macroscopic, probe, halo) binds each direction as a window.
//!
//! Why one allocation even with nine bindings: on an NVIDIA H200 (driver 580, 2026-11-27) a hand-written step read
//! and wrote 0.97 of the copy probe on windows of one allocation per side and 0.67–0.68 on 18 allocations of their
//! own (`crates/gpu/examples/streams/` at 2^26 cells). The lattice's own step did not move with it (0.38 of copy
//! on one allocation per side as on 18: its gap is elsewhere, docs/perf.md); it is kept as the layout that costs
//! nothing and removes one variable.

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Window, packed_len};

use crate::error::{LbmError, Result};

/// The nine direction arrays of one lattice.
#[derive(Debug)]
pub(crate) struct Pops {
    /// The allocations, each holding `per_buffer` consecutive directions (the last perhaps fewer).
    bufs: Vec<GpuBuffer<u32>>,
    /// Words of each direction.
    words: usize,
    /// Words from one direction's start to the next within an allocation.
    stride: usize,
    /// Directions per allocation (9: all in one).
    per_buffer: usize,
    /// The step kernel binds the one buffer once (`a[i·S + k]`) rather than nine windows.
    one_binding: bool,
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

/// Directions of `stride` words that one allocation of at most `max_bytes` holds (1 to 9; the last direction needs
/// only its words, but a stride's worth is counted for simplicity's sake).
fn directions_per_buffer(stride: usize, max_bytes: u64) -> usize {
    let bytes = (stride as u64 * 4).max(1);
    (max_bytes / bytes).clamp(1, 9) as usize
}

impl Pops {
    /// Nine zeroed directions of `words` words in as few allocations as the adapter's buffer limit allows; bound
    /// once by the step kernel when `one_binding` (an error where one binding cannot hold them).
    pub(crate) fn alloc(gpu: &Gpu, words: usize, one_binding: bool) -> Result<Self> {
        if one_binding && let Some(why) = one_buffer_misfit(gpu, words) {
            return Err(LbmError::Unsupported(why));
        }
        let stride = gpu.packed_len::<u32>(words);
        let per_buffer = directions_per_buffer(stride, gpu.limits().max_buffer_size);
        let bufs = (0..9)
            .step_by(per_buffer)
            .map(|first| {
                let n = per_buffer.min(9 - first);
                // The last direction of an allocation needs only its words, not a whole stride.
                gpu.alloc_filled::<u32>((n - 1) * stride + words, 0)
                    .map_err(LbmError::from)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            bufs,
            words,
            stride,
            per_buffer,
            one_binding,
        })
    }

    /// The stride in words between directions when the step kernel binds them as one buffer.
    pub(crate) fn stride(&self) -> Option<usize> {
        self.one_binding.then_some(self.stride)
    }

    /// How many allocations hold the nine directions.
    pub(crate) fn allocations(&self) -> usize {
        self.bufs.len()
    }

    /// Direction `i`'s buffer and where its words start in it.
    fn place(&self, i: usize) -> (&GpuBuffer<u32>, usize) {
        (
            &self.bufs[i / self.per_buffer],
            (i % self.per_buffer) * self.stride,
        )
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
        if self.one_binding {
            vec![self.bufs[0].arg()]
        } else {
            self.dir_args()
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
        self.write_at(gpu, i, 0, data)
    }

    /// Writes direction `i`'s words from word `at` on.
    pub(crate) fn write_at(&self, gpu: &Gpu, i: usize, at: usize, data: &[u32]) -> Result<()> {
        if at
            .checked_add(data.len())
            .is_none_or(|end| end > self.words)
        {
            return Err(LbmError::Shape(format!(
                "{} words at word {at} of a direction of {}",
                data.len(),
                self.words
            )));
        }
        let (buf, offset) = self.place(i);
        Ok(gpu.write(buf, offset + at, data)?)
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

#[cfg(test)]
mod tests {
    use super::directions_per_buffer;

    /// All nine share one allocation where it fits, else each allocation takes as many as fit, in order.
    #[test]
    fn directions_fill_as_few_allocations_as_the_limit_allows() {
        // 8192² f32 on an H200 (4 292 870 144 B per buffer): 2.4 GB, one allocation.
        assert_eq!(directions_per_buffer(1 << 26, 4_292_870_144), 9);
        // The same under a 2 GiB limit: eight directions of 256 MiB in the first, the ninth in a second; a byte
        // less and seven fit.
        assert_eq!(directions_per_buffer(1 << 26, 1 << 31), 8);
        assert_eq!(directions_per_buffer(1 << 26, (1 << 31) - 1), 7);
        // A direction past the limit still gets an allocation of its own (the size check reports it).
        assert_eq!(directions_per_buffer(1 << 30, 1 << 31), 1);
        assert_eq!(directions_per_buffer(0, 1 << 31), 9);
    }
}
