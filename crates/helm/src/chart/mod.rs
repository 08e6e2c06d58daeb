//! Charts: loading directories and archives, `Chart.yaml`, dependencies, values and schemas.

/// A file of a chart: its path relative to the chart root (`templates/x.yaml`) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Path relative to the chart root, `/`-separated.
    pub name: String,
    /// Contents.
    pub data: Vec<u8>,
}
