<?php echo "should not run";
