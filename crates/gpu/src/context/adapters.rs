//! The adapters a `Gpu` is chosen from, best first.

pub(super) fn type_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

pub(super) fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    }
}

/// One adapter as `bespoke adapters` lists it.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
}

/// Every adapter on the backends `WGPU_BACKEND` allows (all if unset), best first: what `Gpu::new` picks from.
pub fn list_adapters() -> Vec<AdapterSummary> {
    let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    let backends = desc.backends;
    let instance = wgpu::Instance::new(desc);
    let mut infos: Vec<wgpu::AdapterInfo> =
        pollster::block_on(instance.enumerate_adapters(backends))
            .iter()
            .map(wgpu::Adapter::get_info)
            .collect();
    infos.sort_by_key(|i| (type_rank(i.device_type), backend_rank(i.backend)));
    infos
        .into_iter()
        .map(|i| AdapterSummary {
            name: i.name,
            backend: format!("{:?}", i.backend).to_lowercase(),
            device_type: format!("{:?}", i.device_type),
            driver: if i.driver.is_empty() {
                i.driver_info
            } else {
                i.driver
            },
        })
        .collect()
}
