//! The WGSL of a row of the streams probe.

use bespoke_gpu::GRID_WGSL;

use crate::rows::{Binding, C, Pattern, Row, W, pull_nx};

/// Spells element `e` of stream `k`.
pub(crate) type Access = Box<dyn Fn(usize, &str) -> String>;

pub(crate) fn ty(width: usize) -> &'static str {
    match width {
        1 => "f32",
        2 => "vec2<f32>",
        _ => "vec4<f32>",
    }
}

/// The kernel of `r` over `n` elements per stream.
pub(crate) fn source(r: &Row, n: usize) -> String {
    let t = ty(r.width);
    let mut s = format!(
        "{GRID_WGSL}\nconst N: u32 = {n}u;\nconst PER: u32 = {}u;\n",
        n / r.cells
    );
    let (sep, pad) = match r.binding {
        Binding::Separate { pad } => (true, pad),
        Binding::Buffers => (true, 0),
        Binding::One { pad } => (false, pad),
    };
    let stride = n + pad / r.width;
    let access = match r.pattern {
        Pattern::InPlace => "read_write",
        _ => "read",
    };
    // Element `e` of input / output stream `k`.
    let (a, b): (Access, Access) = if sep {
        for k in 0..r.k {
            s += &format!("@group(0) @binding({k}) var<storage, {access}> a{k}: array<{t}>;\n");
        }
        match r.pattern {
            Pattern::Copy => {
                for k in 0..r.k {
                    s += &format!(
                        "@group(0) @binding({}) var<storage, read_write> b{k}: array<{t}>;\n",
                        r.k + k
                    );
                }
            }
            Pattern::Reduce => {
                s += &format!(
                    "@group(0) @binding({}) var<storage, read_write> b0: array<{t}>;\n",
                    r.k
                );
            }
            Pattern::InPlace => {}
        }
        let inplace = matches!(r.pattern, Pattern::InPlace);
        (
            Box::new(|k, e| format!("a{k}[{e}]")),
            Box::new(move |k, e| {
                if inplace {
                    format!("a{k}[{e}]")
                } else {
                    format!("b{k}[{e}]")
                }
            }),
        )
    } else {
        s += &format!("@group(0) @binding(0) var<storage, {access}> a: array<{t}>;\n");
        s += &format!("@group(0) @binding(1) var<storage, read_write> b: array<{t}>;\n");
        (
            Box::new(move |k, e| format!("a[{}u + {e}]", k * stride)),
            Box::new(move |k, e| format!("b[{}u + {e}]", k * stride)),
        )
    };
    s += &format!(
        "@compute @workgroup_size({})\nfn main(@builtin(workgroup_id) wid: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32) {{\n    let idx = bespoke_workgroup_linear(wid) * {}u + lid;\n    \
         if idx >= PER {{ return; }}\n",
        r.wg, r.wg
    );
    for c in 0..r.cells {
        s += &format!("    let i{c} = idx + {}u;\n", c * (n / r.cells));
    }
    if r.pulls {
        let nx = pull_nx();
        s += &format!(
            "    let x = idx % {nx}u;\n    let y = idx / {nx}u;\n    let ny = {}u;\n    \
             let x0 = select(x - 1u, {}u, x == 0u);\n    let x1 = x;\n    \
             let x2 = select(x + 1u, 0u, x == {}u);\n    \
             let y0 = select(y - 1u, ny - 1u, y == 0u) * {nx}u;\n    let y1 = y * {nx}u;\n    \
             let y2 = select(y + 1u, 0u, y == ny - 1u) * {nx}u;\n",
            n / nx,
            nx - 1,
            nx - 1
        );
        // Pull from the cell minus the direction's offset: x{1 - cx}, y{1 - cy}.
        for (k, (cx, cy)) in C.iter().enumerate() {
            s += &format!(
                "    let v0_{k} = {};\n",
                a(k, &format!("y{} + x{}", 1 - cy, 1 - cx))
            );
        }
    } else {
        for c in 0..r.cells {
            for k in 0..r.k {
                s += &format!("    let v{c}_{k} = {};\n", a(k, &format!("i{c}")));
            }
        }
    }
    if r.collide {
        let sum = |f: &dyn Fn(i32, i32) -> i32| -> String {
            C.iter()
                .enumerate()
                .filter(|(_, c)| f(c.0, c.1) != 0)
                .fold("0.0".to_owned(), |acc, (k, c)| {
                    format!("{acc} {} v0_{k}", if f(c.0, c.1) < 0 { "-" } else { "+" })
                })
        };
        s += &format!(
            "    let rho = {};\n    let ux = ({}) / rho;\n    let uy = ({}) / rho;\n    \
             let uu = 1.5 * (ux * ux + uy * uy);\n",
            sum(&|_, _| 1),
            sum(&|cx, _| cx),
            sum(&|_, cy| cy)
        );
        for (k, (cx, cy)) in C.iter().enumerate() {
            s += &format!(
                "    let cu{k} = 3.0 * ({cx}.0 * ux + {cy}.0 * uy);\n    \
                 let o0_{k} = {:?} * rho * (1.0 + cu{k} + 0.5 * cu{k} * cu{k} - uu);\n",
                W[k] as f32
            );
        }
    }
    for c in 0..r.cells {
        match r.pattern {
            Pattern::Reduce => {
                let sum: Vec<String> = (0..r.k).map(|k| format!("v{c}_{k}")).collect();
                s += &format!("    {} = {};\n", b(0, &format!("i{c}")), sum.join(" + "));
            }
            _ => {
                for k in 0..r.k {
                    let v = if r.collide {
                        format!("o{c}_{k}")
                    } else {
                        format!("v{c}_{k} + 1.0")
                    };
                    s += &format!("    {} = {v};\n", b(k, &format!("i{c}")));
                }
            }
        }
    }
    s + "}\n"
}
