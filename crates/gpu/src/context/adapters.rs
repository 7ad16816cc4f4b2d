//! The adapters a `Gpu` is chosen from, best first, and which of them a rank of a distributed run takes.

fn type_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    }
}

/// The adapter's kind: adapters of one kind are interchangeable to a distributed run.
fn kind(i: &wgpu::AdapterInfo) -> (u8, u8) {
    (type_rank(i.device_type), backend_rank(i.backend))
}

/// The order of `infos` (indices into it) that a `Gpu` takes the first of: those whose name or PCI bus id contains
/// `wanted` (case-insensitively) where it is given (`0000:3b` picks one of a machine's identical GPUs), best kind first (discrete over integrated over virtual over CPU,
/// Vulkan/Metal/DX12 over GL), and within a kind by PCI bus id, so that every process on a machine sees its GPUs
/// in one order, the order `nvidia-smi` and `rocm-smi` number them in, whatever order the driver enumerated them
/// in. With `node_rank = Some(r)` (a rank of a distributed run, r among the ranks on its machine) only the k
/// adapters of the best kind remain, starting at the (r mod k)-th: one GPU per rank where the machine has as many
/// as it runs ranks, several ranks on a GPU in turn where it has fewer.
pub(super) fn preference(
    infos: &[wgpu::AdapterInfo],
    wanted: Option<&str>,
    node_rank: Option<usize>,
) -> Vec<usize> {
    let needle = wanted.map(str::to_lowercase);
    let mut order: Vec<usize> = (0..infos.len())
        .filter(|&i| {
            needle.as_deref().is_none_or(|n| {
                infos[i].name.to_lowercase().contains(n)
                    || infos[i].device_pci_bus_id.to_lowercase().contains(n)
            })
        })
        .collect();
    // Stable: adapters without a bus id (CPU drivers, some backends) keep the driver's order.
    order.sort_by(|&a, &b| {
        let (x, y) = (&infos[a], &infos[b]);
        kind(x)
            .cmp(&kind(y))
            .then_with(|| x.device_pci_bus_id.cmp(&y.device_pci_bus_id))
    });
    if let (Some(r), Some(&first)) = (node_rank, order.first()) {
        let best = kind(&infos[first]);
        order.retain(|&i| kind(&infos[i]) == best);
        let k = r % order.len();
        order.rotate_left(k);
    }
    order
}

/// One adapter as `bespoke adapters` lists it.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    /// The PCI bus id (`0000:1b:00.0`) where the backend reports one, else empty.
    pub pci_bus_id: String,
}

/// Every adapter on the backends `WGPU_BACKEND` allows (all if unset), in the order `Gpu::new` prefers them
/// (`WGPU_ADAPTER_NAME` not applied: the list shows what it can choose from).
pub fn list_adapters() -> Vec<AdapterSummary> {
    let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    let backends = desc.backends;
    let instance = wgpu::Instance::new(desc);
    let infos: Vec<wgpu::AdapterInfo> = pollster::block_on(instance.enumerate_adapters(backends))
        .iter()
        .map(wgpu::Adapter::get_info)
        .collect();
    preference(&infos, None, None)
        .into_iter()
        .map(|k| {
            let i = infos[k].clone();
            AdapterSummary {
                name: i.name,
                backend: format!("{:?}", i.backend).to_lowercase(),
                device_type: format!("{:?}", i.device_type),
                driver: if i.driver.is_empty() {
                    i.driver_info
                } else {
                    i.driver
                },
                pci_bus_id: i.device_pci_bus_id,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, t: wgpu::DeviceType, b: wgpu::Backend, bus: &str) -> wgpu::AdapterInfo {
        let mut i = wgpu::AdapterInfo::new(t, b);
        i.name = name.into();
        i.device_pci_bus_id = bus.into();
        i
    }

    /// A machine with four GPUs enumerated out of bus order, each also seen through GL, and lavapipe.
    fn machine() -> Vec<wgpu::AdapterInfo> {
        use wgpu::{Backend::*, DeviceType::*};
        let mut m = vec![info("llvmpipe (LLVM 15.0.6, 256 bits)", Cpu, Vulkan, "")];
        for bus in [
            "0000:9b:00.0",
            "0000:1b:00.0",
            "0000:bb:00.0",
            "0000:3b:00.0",
        ] {
            m.push(info("NVIDIA H200", DiscreteGpu, Gl, bus));
            m.push(info("NVIDIA H200", DiscreteGpu, Vulkan, bus));
        }
        m
    }

    fn bus(m: &[wgpu::AdapterInfo], i: usize) -> (&str, wgpu::Backend) {
        (m[i].device_pci_bus_id.as_str(), m[i].backend)
    }

    #[test]
    fn each_rank_on_a_machine_takes_its_own_gpu_in_bus_order() {
        let m = machine();
        let in_order = [
            "0000:1b:00.0",
            "0000:3b:00.0",
            "0000:9b:00.0",
            "0000:bb:00.0",
        ];
        for r in 0..10 {
            let order = preference(&m, None, Some(r));
            // Only the best kind: the four GPUs through Vulkan, starting at this rank's.
            assert_eq!(order.len(), 4, "rank {r}: {order:?}");
            assert_eq!(bus(&m, order[0]), (in_order[r % 4], wgpu::Backend::Vulkan));
            assert!(order.iter().all(|&i| m[i].backend == wgpu::Backend::Vulkan));
        }
        // One domain: the first GPU in bus order, then the others, GL, and the CPU last.
        let order = preference(&m, None, None);
        assert_eq!(order.len(), m.len());
        assert_eq!(bus(&m, order[0]), (in_order[0], wgpu::Backend::Vulkan));
        assert_eq!(m[order[4]].backend, wgpu::Backend::Gl);
        assert_eq!(m[*order.last().unwrap()].device_type, wgpu::DeviceType::Cpu);
    }

    #[test]
    fn a_name_narrows_the_choice_and_ranks_share_what_is_left() {
        let m = machine();
        let order = preference(&m, Some("LLVMPIPE"), Some(3));
        assert_eq!(order, vec![0], "every rank on the one adapter named");
        assert!(preference(&m, Some("radeon"), Some(0)).is_empty());
        // A bus id picks one of identical GPUs, through each backend that sees it.
        let order = preference(&m, Some("0000:9B"), None);
        assert_eq!(order.len(), 2);
        assert_eq!(bus(&m, order[0]), ("0000:9b:00.0", wgpu::Backend::Vulkan));
        assert_eq!(bus(&m, order[1]), ("0000:9b:00.0", wgpu::Backend::Gl));
        assert!(preference(&[], None, Some(0)).is_empty());
        // Without a bus id (CPU drivers) the driver's order stands.
        let cpus: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| info(n, wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan, ""))
            .collect();
        assert_eq!(preference(&cpus, None, Some(4)), vec![1, 2, 0]);
    }
}
