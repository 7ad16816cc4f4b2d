//! Runs one case with size/omega from the command line and prints its metrics (for exploring resolutions).
use bespoke_lbm::Streaming;
use bespoke_lbm::cases::{Case, CaseOptions, CollisionKind, run_case};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let case = Case::parse(&a[1], None)?;
    let nx: usize = a[2].parse()?;
    let ny: usize = a[3].parse()?;
    let omega: Option<f64> = a.get(4).and_then(|s| s.parse().ok());
    let collision = a.get(5).map(|s| CollisionKind::parse(s)).transpose()?;
    let steps = a.get(6).and_then(|s| s.parse().ok());
    let gpu = bespoke_gpu::Gpu::new()?;
    let opts = CaseOptions {
        size: Some((nx, ny)),
        omega,
        collision,
        steps,
        streaming: Some(Streaming::InPlace),
        ..Default::default()
    };
    let r = run_case(&gpu, &case, &opts, &mut |_, _| {})?;
    println!(
        "{} {}x{} ω={omega:?}: {} steps {:.2}s {:.1} MLUPS {:?} {:?}",
        case.name(),
        nx,
        ny,
        r.steps,
        r.seconds,
        r.mlups(),
        r.metrics,
        r.notes
    );
    Ok(())
}
