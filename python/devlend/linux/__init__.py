"""Real Linux on devlend: User-Mode Linux guests whose PCI devices are devlend's models."""
