<?php
header('Content-Type: text/plain; charset=UTF-8');
header('Cache-Control: private, must-revalidate');
echo "Symfony front controller\n";
foreach (['REQUEST_URI', 'SCRIPT_NAME', 'PATH_INFO', 'QUERY_STRING', 'DOCUMENT_URI'] as $k) echo "$k=", $_SERVER[$k] ?? '-', "\n";
echo 'root-is-real=', $_SERVER['DOCUMENT_ROOT'] === realpath($_SERVER['DOCUMENT_ROOT']) ? 'yes' : 'no', "\n";
