//! `helm template`'s output: manifests split, sorted in install order, hooks after them.
