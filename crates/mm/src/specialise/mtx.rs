//! Matrix Market reader: `coordinate` and `array`; `real`, `integer` and `pattern`; `general`, `symmetric`
//! and `skew-symmetric`. Duplicate coordinate entries are summed (as scipy does). Every refusal names the
//! file, the line and the problem.

use std::path::Path;

use super::operator::Operator;
use crate::error::{MmError, Result};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Coordinate,
    Array,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

/// Reads a Matrix Market file; the operator is named after the file stem.
pub fn read_mtx(path: &Path) -> Result<Operator> {
    let text = std::fs::read_to_string(path).map_err(|err| MmError::Io {
        path: path.display().to_string(),
        err,
    })?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let mut op = parse_mtx(&text, &path.display().to_string())?;
    op.name = name;
    Ok(op)
}

/// Parses Matrix Market text; `source` names it in errors (and becomes the operator's name).
pub fn parse_mtx(text: &str, source: &str) -> Result<Operator> {
    let err = |line: usize, reason: String| MmError::Matrix {
        source_name: source.to_owned(),
        line: Some(line),
        reason,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, banner) = lines
        .next()
        .ok_or_else(|| err(1, "empty file (no %%MatrixMarket banner)".into()))?;
    let words: Vec<String> = banner
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") || words.len() != 5 {
        return Err(err(
            1,
            format!(
                "expected `%%MatrixMarket matrix <format> <field> <symmetry>`, found `{banner}`"
            ),
        ));
    }
    if words[1] != "matrix" {
        return Err(err(1, format!("object `{}` is not `matrix`", words[1])));
    }
    let format = match words[2].as_str() {
        "coordinate" => Format::Coordinate,
        "array" => Format::Array,
        f => {
            return Err(err(
                1,
                format!("unknown format `{f}` (coordinate or array)"),
            ));
        }
    };
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" if format == Format::Coordinate => Field::Pattern,
        f => {
            return Err(err(
                1,
                format!("field `{f}` is not supported (real, integer, or pattern with coordinate)"),
            ));
        }
    };
    let symmetry = match words[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        s => {
            return Err(err(
                1,
                format!("symmetry `{s}` is not supported (general, symmetric, skew-symmetric)"),
            ));
        }
    };

    // Comments up to the size line; the PyFR suite records β in one.
    let mut beta_hint = None;
    let mut data = lines.filter_map(|(n, l)| {
        let t = l.trim();
        if let Some(c) = t.strip_prefix('%') {
            if let Some(rest) = c.split("PyFR beta for this op:").nth(1) {
                let v = rest.split([';', ' ']).find(|s| !s.is_empty());
                beta_hint = v.and_then(|v| v.parse::<f64>().ok()).or(beta_hint);
            }
            None
        } else if t.is_empty() {
            None
        } else {
            Some((n, t.to_owned()))
        }
    });
    let (size_line, size) = data
        .next()
        .ok_or_else(|| err(text.lines().count(), "no size line".into()))?;
    let dims: Vec<usize> = size
        .split_whitespace()
        .map(|w| w.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| err(size_line, format!("size line `{size}`: {e}")))?;
    let want = if format == Format::Coordinate { 3 } else { 2 };
    if dims.len() != want {
        return Err(err(
            size_line,
            format!("size line `{size}` should hold {want} integers"),
        ));
    }
    let (m, k) = (dims[0], dims[1]);
    if m == 0 || k == 0 {
        return Err(err(size_line, format!("empty matrix {m}×{k}")));
    }
    if symmetry != Symmetry::General && m != k {
        return Err(err(
            size_line,
            format!("a {} matrix must be square, this one is {m}×{k}", words[4]),
        ));
    }
    let cells = m
        .checked_mul(k)
        .filter(|c| *c <= 1 << 31)
        .ok_or_else(|| err(size_line, format!("{m}×{k} is too large for an operator")))?;
    let mut a = vec![0.0f64; cells];
    let value = |n: usize, w: &str| -> Result<f64> {
        let v = match field {
            Field::Integer => w
                .parse::<i64>()
                .map(|v| v as f64)
                .map_err(|e| err(n, format!("integer value `{w}`: {e}")))?,
            _ => w
                .parse::<f64>()
                .map_err(|e| err(n, format!("value `{w}`: {e}")))?,
        };
        if !v.is_finite() {
            return Err(err(n, format!("value `{w}` is not finite")));
        }
        Ok(v)
    };
    // Stores (i, j) and its mirror; duplicates add up.
    let mut put = |n: usize, i: usize, j: usize, v: f64| -> Result<()> {
        if symmetry != Symmetry::General && j > i {
            return Err(err(
                n,
                format!(
                    "entry ({}, {}) lies above the diagonal of a {} matrix",
                    i + 1,
                    j + 1,
                    words[4]
                ),
            ));
        }
        if symmetry == Symmetry::Skew && i == j {
            return Err(err(n, "a skew-symmetric matrix has a zero diagonal".into()));
        }
        a[i * k + j] += v;
        if i != j {
            match symmetry {
                Symmetry::General => {}
                Symmetry::Symmetric => a[j * k + i] += v,
                Symmetry::Skew => a[j * k + i] -= v,
            }
        }
        Ok(())
    };

    let mut count = 0usize;
    match format {
        Format::Coordinate => {
            let nnz = dims[2];
            for (n, line) in data.by_ref() {
                let w: Vec<&str> = line.split_whitespace().collect();
                let need = if field == Field::Pattern { 2 } else { 3 };
                if w.len() != need {
                    return Err(err(
                        n,
                        format!(
                            "`{line}`: expected {need} fields (row, column{})",
                            if need == 3 { ", value" } else { "" }
                        ),
                    ));
                }
                let idx = |s: &str, dim: usize, what: &str| -> Result<usize> {
                    let v: usize = s
                        .parse()
                        .map_err(|e| err(n, format!("{what} index `{s}`: {e}")))?;
                    if v == 0 || v > dim {
                        return Err(err(n, format!("{what} index {v} outside 1..={dim}")));
                    }
                    Ok(v - 1)
                };
                let (i, j) = (idx(w[0], m, "row")?, idx(w[1], k, "column")?);
                let v = if field == Field::Pattern {
                    1.0
                } else {
                    value(n, w[2])?
                };
                count += 1;
                if count > nnz {
                    return Err(err(
                        n,
                        format!("more entries than the {nnz} the size line declares"),
                    ));
                }
                put(n, i, j, v)?;
            }
            if count != nnz {
                return Err(err(
                    text.lines().count(),
                    format!("truncated: {count} entries read, the size line declares {nnz}"),
                ));
            }
        }
        Format::Array => {
            // Column-major; symmetric storage lists only the lower triangle (skew: strictly lower).
            let mut cells_iter =
                (0..k)
                    .flat_map(|j| (0..m).map(move |i| (i, j)))
                    .filter(|&(i, j)| match symmetry {
                        Symmetry::General => true,
                        Symmetry::Symmetric => i >= j,
                        Symmetry::Skew => i > j,
                    });
            for (n, line) in data.by_ref() {
                for w in line.split_whitespace() {
                    let (i, j) = cells_iter
                        .next()
                        .ok_or_else(|| err(n, "more values than the matrix holds".into()))?;
                    put(n, i, j, value(n, w)?)?;
                    count += 1;
                }
            }
            if cells_iter.next().is_some() {
                return Err(err(
                    text.lines().count(),
                    format!(
                        "truncated: only {count} values for a {m}×{k} {} array",
                        words[4]
                    ),
                ));
            }
        }
    }
    let mut op = Operator::from_dense(source, m, k, a)?;
    op.beta_hint = beta_hint;
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinate_with_pyfr_beta() {
        let t = "%%MatrixMarket matrix coordinate real general\n% PyFR beta for this op: 1.0; use: x\n2 3 3\n1 1 0.5\n2 3 -2\n1 1 0.25\n";
        let op = parse_mtx(t, "t").unwrap();
        assert_eq!((op.m, op.k), (2, 3));
        assert_eq!(op.values(), &[0.75, 0.0, 0.0, 0.0, 0.0, -2.0]);
        assert_eq!(op.beta_hint, Some(1.0));
    }

    #[test]
    fn array_symmetric_integer_and_pattern() {
        let t = "%%MatrixMarket matrix array integer symmetric\n2 2\n1\n2\n3\n";
        assert_eq!(parse_mtx(t, "t").unwrap().values(), &[1.0, 2.0, 2.0, 3.0]);
        let t = "%%MatrixMarket matrix array real general\n2 2\n1 2\n3 4\n";
        // column-major
        assert_eq!(parse_mtx(t, "t").unwrap().values(), &[1.0, 3.0, 2.0, 4.0]);
        let t = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n";
        let op = parse_mtx(t, "t").unwrap();
        assert_eq!(op.values(), &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        let t = "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n";
        assert_eq!(parse_mtx(t, "t").unwrap().values(), &[0.0, -3.0, 3.0, 0.0]);
    }

    #[test]
    fn malformed_files_name_the_problem() {
        let cases = [
            ("", "banner"),
            (
                "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
                "complex",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n",
                "truncated",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n",
                "row index 3",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 nan\n",
                "not finite",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 x\n",
                "value `x`",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2\n",
                "3 integers",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n",
                "more entries",
            ),
            (
                "%%MatrixMarket matrix array real general\n2 2\n1 2 3\n",
                "truncated",
            ),
            (
                "%%MatrixMarket matrix array real general\n1 1\n1 2\n",
                "more values",
            ),
            (
                "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n",
                "above the diagonal",
            ),
            (
                "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
                "square",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1e999\n",
                "not finite",
            ),
        ];
        for (text, want) in cases {
            let e = parse_mtx(text, "f.mtx").unwrap_err().to_string();
            assert!(e.contains(want) && e.starts_with("f.mtx"), "{text:?}: {e}");
        }
    }

    /// The shipped PyFR operators damaged at random (`testing::damage`) give an error naming the file, or an
    /// operator of finite values: never a panic.
    #[test]
    fn damaged_operators_give_an_error_or_finite_values_never_a_panic() {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pyfr");
        let seed = bespoke_gpu::testing::fresh_seed();
        let mut rng = bespoke_gpu::rng::seeded(seed);
        let (mut failures, mut errors, mut read) = (Vec::new(), 0, 0);
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("shipped operators")
            .map(|e| e.expect("entry").path())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).expect("shipped operator");
            for _ in 0..30 {
                let (what, damaged) = bespoke_gpu::testing::damage(&bytes, &mut rng);
                let text = String::from_utf8_lossy(&damaged);
                match catch_unwind(AssertUnwindSafe(|| parse_mtx(&text, "f.mtx"))) {
                    Err(_) => failures.push(format!("{}, {what}: panicked", path.display())),
                    Ok(Ok(op)) if op.values().iter().any(|v| !v.is_finite()) => failures.push(
                        format!("{}, {what}: read with a non-finite value", path.display()),
                    ),
                    Ok(Ok(_)) => read += 1,
                    Ok(Err(e)) => {
                        assert!(e.to_string().starts_with("f.mtx"), "{what}: {e}");
                        errors += 1;
                    }
                }
            }
        }
        eprintln!(
            "{errors} damaged operators refused, {read} read (damage may leave a valid file)"
        );
        assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
        assert!(
            errors > 100,
            "only {errors} of 270 damaged operators refused"
        );
    }
}
