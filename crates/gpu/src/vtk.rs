//! VTK XML files for ParaView and VisIt, written as they are made: the XML head first, then every array's raw
//! little-endian bytes in one appended block, each after its byte count (`header_type="UInt64"`), through an
//! [`AtomicFile`] (the file appears whole or not at all). No array is held in memory as bytes: a writer gets
//! each array's values from a closure that streams them. The parallel index files (`.pvti`, `.pvtu`) name the
//! pieces each rank wrote.
//!
//! A host utility beside [`AtomicFile`] because both solvers write these files (bespoke-lbm's image data,
//! bespoke-fv's unstructured grid); it touches no device.

use std::io::Write;
use std::path::Path;

use crate::atomic::AtomicFile;

/// A value type of a data array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    Float32,
    Float64,
    Int32,
    Int64,
    UInt8,
}

impl Scalar {
    /// The `type` attribute VTK reads.
    pub fn name(self) -> &'static str {
        match self {
            Self::Float32 => "Float32",
            Self::Float64 => "Float64",
            Self::Int32 => "Int32",
            Self::Int64 => "Int64",
            Self::UInt8 => "UInt8",
        }
    }
    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            Self::Float32 | Self::Int32 => 4,
            Self::Float64 | Self::Int64 => 8,
            Self::UInt8 => 1,
        }
    }
}

/// Streams an array's values into the file; it must write exactly `tuples × components` values of its type.
pub type Values<'a> = Box<dyn FnMut(&mut dyn Write) -> std::io::Result<()> + 'a>;

/// One data array of a piece.
pub struct DataArray<'a> {
    pub name: &'a str,
    pub scalar: Scalar,
    pub components: usize,
    pub tuples: usize,
    pub values: Values<'a>,
}

impl std::fmt::Debug for DataArray<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataArray")
            .field("name", &self.name)
            .field("scalar", &self.scalar)
            .field("components", &self.components)
            .field("tuples", &self.tuples)
            .finish_non_exhaustive()
    }
}

impl<'a> DataArray<'a> {
    /// An array of `tuples` tuples of `components` values each, streamed by `values`.
    pub fn new(
        name: &'a str,
        scalar: Scalar,
        components: usize,
        tuples: usize,
        values: Values<'a>,
    ) -> Self {
        Self {
            name,
            scalar,
            components,
            tuples,
            values,
        }
    }
    /// A one-component array of `values` as `Float32`.
    pub fn f32s(name: &'a str, values: &'a [f32]) -> Self {
        Self {
            name,
            scalar: Scalar::Float32,
            components: 1,
            tuples: values.len(),
            values: Box::new(move |w| write_values(w, values.iter().copied(), f32::to_le_bytes)),
        }
    }
    /// A one-component array of `values` as `Float64`.
    pub fn f64s(name: &'a str, values: &'a [f64]) -> Self {
        Self {
            name,
            scalar: Scalar::Float64,
            components: 1,
            tuples: values.len(),
            values: Box::new(move |w| write_values(w, values.iter().copied(), f64::to_le_bytes)),
        }
    }
    fn bytes(&self) -> usize {
        self.tuples * self.components * self.scalar.size()
    }
}

/// An element of a piece that holds arrays (`Points`, `Cells`, `PointData`, `CellData`), with its attributes
/// (`Scalars="rho"`; may be empty).
#[derive(Debug)]
pub struct Section<'a> {
    pub tag: &'static str,
    pub attributes: String,
    pub arrays: Vec<DataArray<'a>>,
}

/// One serial XML file: a data set of `kind` (`ImageData`, `UnstructuredGrid`) with its attributes, one piece
/// with its attributes, and the piece's sections.
#[derive(Debug)]
pub struct XmlFile<'a> {
    pub kind: &'static str,
    pub attributes: String,
    pub piece: String,
    pub sections: Vec<Section<'a>>,
}

impl XmlFile<'_> {
    /// Writes the file at `path` (whole or not at all). An array that writes more or fewer bytes than it
    /// declares is an `InvalidData` error naming it, and nothing is left at `path`.
    pub fn write(self, path: &Path) -> std::io::Result<()> {
        self.stage(path)?.commit()
    }

    /// The file written whole into a temporary file beside `path`, not yet in its place: a parallel file's
    /// writers each stage their piece and [`AtomicFile::commit`] it once every piece was written, so a piece
    /// that fails on one of them leaves no other writer's new piece behind (a staged file dropped leaves
    /// nothing) and the pieces of an earlier write stay whole.
    pub fn stage(self, path: &Path) -> std::io::Result<AtomicFile> {
        let mut f = AtomicFile::create(path)?;
        self.write_to(&mut f)?;
        Ok(f)
    }

    /// The file's bytes into `w`.
    pub fn write_to(mut self, w: &mut dyn Write) -> std::io::Result<()> {
        let kind = self.kind;
        writeln!(w, r#"<?xml version="1.0"?>"#)?;
        writeln!(
            w,
            r#"<VTKFile type="{kind}" version="1.0" byte_order="LittleEndian" header_type="UInt64">"#
        )?;
        writeln!(w, "  <{kind}{}>", spaced(&self.attributes))?;
        writeln!(w, "    <Piece{}>", spaced(&self.piece))?;
        let mut offset = 0usize;
        for s in &self.sections {
            writeln!(w, "      <{}{}>", s.tag, spaced(&s.attributes))?;
            for a in &s.arrays {
                writeln!(
                    w,
                    r#"        <DataArray type="{}" Name="{}" NumberOfComponents="{}" format="appended" offset="{offset}"/>"#,
                    a.scalar.name(),
                    a.name,
                    a.components
                )?;
                offset += 8 + a.bytes();
            }
            writeln!(w, "      </{}>", s.tag)?;
        }
        writeln!(w, "    </Piece>")?;
        writeln!(w, "  </{kind}>")?;
        write!(w, "  <AppendedData encoding=\"raw\">\n   _")?;
        for s in &mut self.sections {
            for a in &mut s.arrays {
                let declared = a.bytes();
                w.write_all(&(declared as u64).to_le_bytes())?;
                let mut counted = Counted { w, n: 0 };
                (a.values)(&mut counted)?;
                if counted.n != declared {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "array `{}` wrote {} bytes where it declares {declared} ({} tuples of {} {})",
                            a.name,
                            counted.n,
                            a.tuples,
                            a.components,
                            a.scalar.name()
                        ),
                    ));
                }
            }
        }
        writeln!(w, "\n  </AppendedData>")?;
        writeln!(w, "</VTKFile>")
    }
}

/// A section of a parallel index (`PCellData`, `PPointData`, …): its tag, its attributes and what each piece
/// holds of it, (name, scalar, components) an array.
#[derive(Debug)]
pub struct ParallelSection<'a> {
    pub tag: &'static str,
    pub attributes: String,
    pub arrays: Vec<(&'a str, Scalar, usize)>,
}

/// A parallel index file (`.pvti`, `.pvtu`): the data set `P{kind}` with its attributes, the arrays each
/// piece holds (section tag such as `PCellData`, its attributes, and (name, scalar, components) per array) and
/// the pieces, each as its attributes (`Extent="…"`, or none) and its file relative to the index.
#[derive(Debug)]
pub struct ParallelFile<'a> {
    pub kind: &'static str,
    pub attributes: String,
    pub sections: Vec<ParallelSection<'a>>,
    pub pieces: Vec<(String, String)>,
}

impl ParallelFile<'_> {
    /// Writes the index at `path` (whole or not at all).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut f = AtomicFile::create(path)?;
        self.write_to(&mut f)?;
        f.commit()
    }

    /// The index's bytes into `w`.
    pub fn write_to(&self, w: &mut dyn Write) -> std::io::Result<()> {
        let kind = format!("P{}", self.kind);
        writeln!(w, r#"<?xml version="1.0"?>"#)?;
        writeln!(
            w,
            r#"<VTKFile type="{kind}" version="1.0" byte_order="LittleEndian" header_type="UInt64">"#
        )?;
        writeln!(w, "  <{kind}{}>", spaced(&self.attributes))?;
        for s in &self.sections {
            writeln!(w, "    <{}{}>", s.tag, spaced(&s.attributes))?;
            for (name, scalar, components) in &s.arrays {
                writeln!(
                    w,
                    r#"      <PDataArray type="{}" Name="{name}" NumberOfComponents="{components}"/>"#,
                    scalar.name()
                )?;
            }
            writeln!(w, "    </{}>", s.tag)?;
        }
        for (attributes, source) in &self.pieces {
            writeln!(
                w,
                r#"    <Piece{} Source="{}"/>"#,
                spaced(attributes),
                xml_escape(source)
            )?;
        }
        writeln!(w, "  </{kind}>")?;
        writeln!(w, "</VTKFile>")
    }
}

/// Writes ParaView's collection file (`.pvd`) at `path` (whole or not at all): a time series, each entry its
/// time and its file relative to the collection.
pub fn write_collection(path: &Path, entries: &[(f64, String)]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    writeln!(f, r#"<?xml version="1.0"?>"#)?;
    writeln!(
        f,
        r#"<VTKFile type="Collection" version="1.0" byte_order="LittleEndian">"#
    )?;
    writeln!(f, "  <Collection>")?;
    for (time, file) in entries {
        writeln!(
            f,
            r#"    <DataSet timestep="{time}" part="0" file="{}"/>"#,
            xml_escape(file)
        )?;
    }
    writeln!(f, "  </Collection>")?;
    writeln!(f, "</VTKFile>")?;
    f.commit()
}

/// The frame of a time series beside `path` at `step`: `flow.pvti` → `flow_00000200.pvti` (no extension: `vtk`).
pub fn series_frame(path: &Path, step: u64) -> std::path::PathBuf {
    let (stem, ext) = series_name(path);
    path.with_file_name(format!("{stem}_{step:08}.{ext}"))
}

/// Rewrites ParaView's collection beside `path` (`flow.pvti` → `flow.pvd`) to list every frame of its series in
/// the folder ([`series_frame`]'s names) by step, so that a resumed run's frames join the earlier ones and an
/// interrupted run leaves a collection of the frames it wrote.
pub fn write_series_collection(path: &Path) -> std::io::Result<()> {
    let (stem, ext) = series_name(path);
    let dir = crate::folder_of(path);
    let mut frames = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let step: Option<u64> = name
            .strip_prefix(&format!("{stem}_"))
            .and_then(|r| r.strip_suffix(&format!(".{ext}")))
            .filter(|d| d.len() >= 8 && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse().ok());
        if let Some(step) = step {
            frames.push((step, name));
        }
    }
    frames.sort();
    let entries: Vec<(f64, String)> = frames.into_iter().map(|(s, n)| (s as f64, n)).collect();
    write_collection(&path.with_file_name(format!("{stem}.pvd")), &entries)
}

/// A series' stem and extension (`flow.pvti` → `flow`, `pvti`; no extension: `vtk`).
fn series_name(path: &Path) -> (String, String) {
    let part = |s: Option<&std::ffi::OsStr>, or: &str| {
        s.map_or_else(|| or.to_string(), |s| s.to_string_lossy().into_owned())
    };
    (
        part(path.file_stem(), "fields"),
        part(path.extension(), "vtk"),
    )
}

/// `values` into `w` as `to_bytes` makes their bytes (`f32::to_le_bytes`), converted a block at a time (no copy
/// of the whole array).
pub fn write_values<T: Copy, const N: usize>(
    w: &mut dyn Write,
    values: impl IntoIterator<Item = T>,
    to_bytes: impl Fn(T) -> [u8; N],
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(64 * 1024);
    for v in values {
        buf.extend_from_slice(&to_bytes(v));
        if buf.len() >= 64 * 1024 - N {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)
}

/// The name of the piece file rank `rank` of `ranks` writes beside the index `index` (`out.pvti` →
/// `out_p3.vti`), and the same name relative to the index's folder (what the index's `Source` holds).
pub fn piece_path(
    index: &Path,
    rank: usize,
    ranks: usize,
    extension: &str,
) -> (std::path::PathBuf, String) {
    let stem = index
        .file_stem()
        .map_or_else(|| "out".into(), |s| s.to_string_lossy().into_owned());
    let width = (ranks.max(1) - 1).to_string().len();
    let name = format!("{stem}_p{rank:0width$}.{extension}");
    (index.with_file_name(&name), name)
}

/// A data array read back by [`read_appended`].
#[derive(Clone, Debug, PartialEq)]
pub struct ReadArray {
    pub name: String,
    /// The `type` attribute (`Float32`, `Int64`, …).
    pub scalar: String,
    pub components: usize,
    /// The array's raw little-endian bytes.
    pub bytes: Vec<u8>,
}

/// The XML head (everything before the appended block) and every data array of a file that [`XmlFile`] wrote,
/// in the head's order: what tests and tools read back. A file of another shape (no appended block, an offset
/// or a byte count past its end) is an error naming what is missing, not a panic.
pub fn read_appended(bytes: &[u8]) -> Result<(String, Vec<ReadArray>), String> {
    let marker = b"<AppendedData encoding=\"raw\">";
    let head_end = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .ok_or("no raw appended block")?;
    let head = std::str::from_utf8(&bytes[..head_end])
        .map_err(|e| format!("the XML head is not UTF-8: {e}"))?;
    let after = head_end + marker.len();
    let data = after
        + bytes[after..]
            .iter()
            .position(|&c| c == b'_')
            .ok_or("no `_` opening the appended block")?
        + 1;
    let mut arrays = Vec::new();
    for tag in head.split("<DataArray").skip(1) {
        let tag = &tag[..tag.find('>').ok_or("an unclosed DataArray tag")?];
        let name = attribute(tag, "Name").ok_or("a DataArray without a Name")?;
        let field = |what: &str| -> Result<usize, String> {
            attribute(tag, what)
                .and_then(|v| v.parse().ok())
                .ok_or(format!("array `{name}`: no {what}"))
        };
        let (components, offset) = (field("NumberOfComponents")?, field("offset")?);
        let at = data + offset;
        let count = bytes.get(at..at + 8).ok_or(format!(
            "array `{name}`: its offset {offset} is past the file's end"
        ))?;
        let len = u64::from_le_bytes(count.try_into().expect("8 bytes")) as usize;
        let values = bytes.get(at + 8..at + 8 + len).ok_or(format!(
            "array `{name}`: {len} bytes run past the file's end"
        ))?;
        arrays.push(ReadArray {
            scalar: attribute(tag, "type").unwrap_or_default(),
            name,
            components,
            bytes: values.to_vec(),
        });
    }
    Ok((head.to_string(), arrays))
}

/// The value of attribute `name` in an XML tag's text.
pub fn attribute(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_string())
}

fn spaced(attributes: &str) -> String {
    if attributes.is_empty() {
        String::new()
    } else {
        format!(" {attributes}")
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A writer that counts what passes through it.
struct Counted<'w> {
    w: &'w mut dyn Write,
    n: usize,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let wrote = self.w.write(buf)?;
        self.n += wrote;
        Ok(wrote)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The appended block read back: each array's declared length, then its bytes, at the offsets the head
    /// gives.
    #[test]
    fn arrays_sit_at_their_offsets_after_their_byte_counts() {
        let a: Vec<f32> = (0..70_000).map(|i| i as f32 * 0.25 - 3.0).collect();
        let b = [1.5f32, -2.0, f32::MIN_POSITIVE];
        let file = XmlFile {
            kind: "ImageData",
            attributes: r#"WholeExtent="0 3 0 1 0 0""#.into(),
            piece: r#"Extent="0 3 0 1 0 0""#.into(),
            sections: vec![Section {
                tag: "CellData",
                attributes: r#"Scalars="a""#.into(),
                arrays: vec![DataArray::f32s("a", &a), DataArray::f32s("b", &b)],
            }],
        };
        let mut out = Vec::new();
        file.write_to(&mut out).unwrap();
        let text = String::from_utf8_lossy(&out);
        let offsets: Vec<String> = text
            .split("<DataArray")
            .skip(1)
            .map(|t| attribute(t, "offset").unwrap())
            .collect();
        assert_eq!(offsets, ["0".to_string(), (8 + 4 * a.len()).to_string()]);
        let (head, arrays) = read_appended(&out).unwrap();
        assert!(head.contains(r#"<Piece Extent="0 3 0 1 0 0">"#), "{head}");
        assert_eq!(arrays.len(), 2);
        for (got, (name, want)) in arrays.iter().zip([("a", &a[..]), ("b", &b[..])]) {
            assert_eq!(
                (got.name.as_str(), got.scalar.as_str(), got.components),
                (name, "Float32", 1)
            );
            let bits: Vec<u32> = got
                .bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(bits, want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
        // A file cut short is an error naming the array, not a panic.
        let cut = read_appended(&out[..out.len() - 40]).unwrap_err();
        assert!(cut.contains("array `b`"), "{cut}");
        assert!(text.ends_with("\n  </AppendedData>\n</VTKFile>\n"));
    }

    #[test]
    fn an_array_that_writes_other_than_it_declares_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.vti");
        let v = [1.0f32, 2.0];
        let mut short = DataArray::f32s("short", &v);
        short.tuples = 3;
        let err = XmlFile {
            kind: "ImageData",
            attributes: String::new(),
            piece: String::new(),
            sections: vec![Section {
                tag: "CellData",
                attributes: String::new(),
                arrays: vec![short],
            }],
        }
        .write(&path)
        .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            err.to_string()
                .contains("`short` wrote 8 bytes where it declares 12")
        );
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_index_names_each_piece_and_every_array() {
        let idx = ParallelFile {
            kind: "ImageData",
            attributes: r#"WholeExtent="0 4 0 2 0 0" GhostLevel="0""#.into(),
            sections: vec![ParallelSection {
                tag: "PCellData",
                attributes: String::new(),
                arrays: vec![
                    ("rho", Scalar::Float32, 1),
                    ("velocity", Scalar::Float32, 3),
                ],
            }],
            pieces: vec![
                (r#"Extent="0 2 0 2 0 0""#.into(), "o_p0.vti".into()),
                (r#"Extent="2 4 0 2 0 0""#.into(), "a&b\".vti".into()),
            ],
        };
        let mut out = Vec::new();
        idx.write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#"<VTKFile type="PImageData""#));
        assert!(
            text.contains(r#"<PDataArray type="Float32" Name="velocity" NumberOfComponents="3"/>"#)
        );
        assert!(text.contains(r#"<Piece Extent="0 2 0 2 0 0" Source="o_p0.vti"/>"#));
        assert!(text.contains(r#"Source="a&amp;b&quot;.vti""#));
        assert!(text.trim_end().ends_with("</PImageData>\n</VTKFile>"));
    }

    #[test]
    fn piece_names_sort_by_rank() {
        let p = |r, n| piece_path(Path::new("d/out.pvti"), r, n, "vti");
        assert_eq!(p(0, 1).1, "out_p0.vti");
        assert_eq!(p(3, 12).1, "out_p03.vti");
        assert_eq!(p(11, 12).0, Path::new("d/out_p11.vti"));
    }
}
