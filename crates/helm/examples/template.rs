//! `helm template` in a small binary, for profiling the engine without building `capstan`.
//!
//! `cargo run --release -p capstan-helm --example template -- [RELEASE] CHART [flags]` prints
//! what `capstan helm template` prints. With `HELM_EXAMPLE_LOOP=N` it loads and renders the
//! chart N times in one process (the in-process benchmark's shape) and prints the median time.

use std::path::Path;
use std::time::Instant;

use capstan_helm::output::Template;
use capstan_helm::template::Env;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let template = match Template::from_args(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("Error: {}", e.message);
            return std::process::ExitCode::FAILURE;
        }
    };
    let rounds: usize = std::env::var("HELM_EXAMPLE_LOOP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let cwd = Path::new(".");
    if std::env::var_os("HELM_EXAMPLE_PHASES").is_some() {
        return phases(&template, cwd);
    }
    if rounds > 0 {
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let start = Instant::now();
            if let Err(e) = load_and_render(&template, cwd) {
                eprintln!("Error: {e}");
                return std::process::ExitCode::FAILURE;
            }
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!("median of {rounds}: {:.3} ms", times[rounds / 2] * 1e3);
        return std::process::ExitCode::SUCCESS;
    }
    let result = template.execute(cwd, &mut Env::new());
    capstan_helm::leak_thread_caches();
    match result {
        Ok(rendered) => {
            print!("{}", rendered.stdout);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            print!("{}", e.output);
            eprintln!("Error: {}", e.message);
            std::process::ExitCode::FAILURE
        }
    }
}

/// What the in-process benchmark times: the chart loaded and rendered (no printing).
fn load_and_render(template: &Template, cwd: &Path) -> Result<(), String> {
    let (name, chart_ref) = template.name_and_chart().map_err(|e| e.message)?;
    let values = template
        .values(cwd, &|_, _| Ok(()))
        .map_err(|e| e.message)?;
    let chart = capstan_helm::output::load_chart(&cwd.join(chart_ref)).map_err(|e| e.message)?;
    let options = capstan_helm::engine::Options {
        release_name: name,
        namespace: template
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        ..capstan_helm::engine::Options::default()
    };
    capstan_helm::engine::render(&chart, &values, &options, &mut Env::new())
        .map_err(|e| e.message)?;
    Ok(())
}

/// Times the phases of one run (values, load, render, print) on stderr.
fn phases(template: &Template, cwd: &Path) -> std::process::ExitCode {
    let result = (|| -> Result<(), capstan_helm::output::Error> {
        let start = Instant::now();
        let (name, chart_ref) = template.name_and_chart()?;
        let values = template.values(cwd, &|_, _| Ok(()))?;
        let t_values = start.elapsed();
        let chart = capstan_helm::output::load_chart(&cwd.join(chart_ref))?;
        let t_load = start.elapsed();
        let options = capstan_helm::engine::Options {
            release_name: name,
            namespace: template
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            ..capstan_helm::engine::Options::default()
        };
        let files = capstan_helm::engine::render(&chart, &values, &options, &mut Env::new())
            .map_err(|e| capstan_helm::output::Error {
                message: e.message,
                output: String::new(),
            })?;
        let t_render = start.elapsed();
        let (files, _) = capstan_helm::output::without_notes(&chart.metadata.name, files);
        let out = capstan_helm::output::print(&files, &[], &template.print)?;
        let t_print = start.elapsed();
        eprintln!(
            "values {:?} load {:?} render {:?} print {:?} ({} bytes)",
            t_values,
            t_load.saturating_sub(t_values),
            t_render.saturating_sub(t_load),
            t_print.saturating_sub(t_render),
            out.len()
        );
        Ok(())
    })();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", e.message);
            std::process::ExitCode::FAILURE
        }
    }
}
