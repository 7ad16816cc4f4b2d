//! Reads .msh files and prints their sizes (for checking the reader on real meshes).
fn main() {
    for p in std::env::args().skip(1) {
        let t = std::time::Instant::now();
        match bespoke_fv::gmsh::read_msh(std::path::Path::new(&p)) {
            Ok(m) => println!(
                "{p}: {} nodes, {} tets, physical {:?}, {:.2} s",
                m.nodes.len(),
                m.tets.len(),
                m.physical_names,
                t.elapsed().as_secs_f64()
            ),
            Err(e) => println!("{p}: error: {e}"),
        }
    }
}
