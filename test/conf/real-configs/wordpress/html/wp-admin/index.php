<?php http_response_code(403); echo "not logged in\n";
