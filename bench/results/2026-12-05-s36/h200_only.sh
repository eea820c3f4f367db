name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $name"
case "$name" in *H200*) bash bench/results/2026-12-05-s35/call1.sh ;; *) echo "not an H200: call1 skipped" ;; esac
