//! Loading a chart archive from bytes nobody vouched for: `chart::load_archive` must refuse or
//! load, never panic, hang or exhaust memory (bad gzip or tar, path escapes, links, oversize
//! entries, bad Chart.yaml or values, nested archives under `charts/`). What loads keeps every
//! file inside the chart, and preparing it for a render (dependencies, values, schemas) must
//! not panic either.

#![no_main]

use capstan_helm::chart::{self, Chart};
use libfuzzer_sys::fuzz_target;

/// Every path of the chart and its subcharts is relative and has no `..` component.
fn assert_confined(chart: &Chart) {
    for file in chart.templates.iter().chain(&chart.files) {
        assert!(
            !file.name.starts_with('/') && !file.name.split('/').any(|part| part == ".."),
            "a chart file escapes the chart: {:?}",
            file.name
        );
    }
    chart.dependencies.iter().for_each(assert_confined);
}

fuzz_target!(|data: &[u8]| {
    let Ok(chart) = chart::load_archive(data) else {
        return;
    };
    assert_confined(&chart);
    let _ = chart::check_dependencies(&chart);
    let _ = chart::prepare(&chart, &chart::Values::new());
});
