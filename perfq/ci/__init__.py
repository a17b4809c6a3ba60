"""perfq ci: GitHub Actions workflows for perfq and the commands their steps run."""
