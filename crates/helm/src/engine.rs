//! A render of a chart: every template executed with its chart's values, as Helm's
//! `engine.Render` does.
